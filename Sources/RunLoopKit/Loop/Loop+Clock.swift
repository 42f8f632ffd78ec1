/// The clock a loop reads its time from: CLOCK_MONOTONIC, or a `VirtualLoop`'s virtual
/// clock. Everything that measures time on the loop's behalf goes through here.
extension Loop {
  /// The loop's clock now: CLOCK_MONOTONIC (`LoopClock.Instant.now`) for the loop of a thread,
  /// the virtual clock for a `VirtualLoop`'s. Code that computes deadlines for a loop reads
  /// this rather than `LoopClock.Instant.now`, so that it runs unchanged on a virtual loop.
  public var now: LoopClock.Instant { virtualClock?.now ?? .now }

  /// Whether this is a `VirtualLoop`'s loop (for the executors' `Task.sleep`).
  package var isVirtual: Bool { virtualClock != nil }

  /// Whether `deadline` has come, for a run on the loop's own thread. The clock only moves
  /// forward, so a deadline at or before a reading already taken has come without reading it
  /// again: a zero-length run asks three times and reads the clock for none of them (a
  /// reading costs some tens of nanoseconds in a VM, a tenth of such a run).
  @inline(__always)
  func hasPassed(_ deadline: LoopClock.Instant) -> Bool {
    if deadline <= clockFloor { return true }
    let reading = now
    noteClockReading(reading)
    return deadline <= reading
  }

  /// Keeps `reading` for `hasPassed`, on a loop of a thread only: a virtual loop's driving
  /// thread changes, and its clock is its own.
  @inline(__always)
  func noteClockReading(_ reading: LoopClock.Instant) {
    if virtualClock == nil && reading > clockFloor { clockFloor = reading }
  }

  /// `now` plus `delay`, a negative delay counting as zero: the rule every delay follows.
  func instant(after delay: Duration) -> LoopClock.Instant {
    // Zero (a poll, `run(for: .zero)`) skips Duration's 128-bit arithmetic.
    delay <= .zero ? now : .after(delay, from: now)
  }
}
