/// The clock a loop reads its time from: CLOCK_MONOTONIC, or a `VirtualLoop`'s virtual
/// clock. Everything that measures time on the loop's behalf goes through here.
extension Loop {
  /// The loop's clock now: CLOCK_MONOTONIC (`LoopClock.Instant.now`) for the loop of a thread,
  /// the virtual clock for a `VirtualLoop`'s. Code that computes deadlines for a loop reads
  /// this rather than `LoopClock.Instant.now`, so that it runs unchanged on a virtual loop.
  public var now: LoopClock.Instant { virtualClock?.now ?? .now }

  /// Whether this is a `VirtualLoop`'s loop (for the executors' `Task.sleep`).
  package var isVirtual: Bool { virtualClock != nil }

  /// `now` plus `delay`, a negative delay counting as zero: the rule every delay follows.
  func instant(after delay: Duration) -> LoopClock.Instant {
    // Zero (a poll, `run(for: .zero)`) skips Duration's 128-bit arithmetic.
    delay <= .zero ? now : .after(delay, from: now)
  }
}
