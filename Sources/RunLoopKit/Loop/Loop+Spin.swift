/// The spin step of the wait phase (`waitForEvents`): under a spinning `WaitPolicy`, the loop
/// watches its wake flag and its epoll set for a while before it commits to sleeping, so
/// work that arrives within the window is taken without a kernel wake-up.
extension Loop {
  /// What the spin step did: whether it ran, what it found, and (for a tracer) when.
  struct SpinOutcome {
    var ran = false
    /// Events found ([] for a posted wake-up), or nil when nothing turned up in the window.
    var found: [Epoll.Event]?
    var interval: (start: LoopClock.Instant, end: LoopClock.Instant)?
    /// When the spin began and (if it found work) ended, for the adaptive policy.
    var began: LoopClock.Instant?
    var foundAt: LoopClock.Instant?
  }

  /// Spins first when the wait policy asks for it and no wake-up is already pending.
  func spinIfAsked(
    _ policy: WaitPolicy, on epoll: Epoll, until deadline: LoopClock.Instant?
  ) -> SpinOutcome {
    // Checked before the adaptive policy is asked, so a pending wake-up uses up no skip.
    guard policy != .sleep, !wakePending.load(ordering: .acquiring),
      !wakeAsked.load(ordering: .acquiring), !posted.mayHaveWaiting
    else {
      return SpinOutcome()
    }
    let window: Duration?
    switch policy {
    case .sleep: return SpinOutcome()
    case .spinThenSleep(let length): window = length
    case .busyWait: window = nil
    case .adaptive:
      guard let length = adaptiveSpin.window() else { return SpinOutcome() }
      window = length
    }
    let learning = policy == .adaptive
    let traced = tracing.load(ordering: .relaxed)
    // Otherwise the clock is read only for a tracer: work found by spinning goes out at once.
    guard learning || traced else {
      return SpinOutcome(ran: true, found: spin(on: epoll, window: window, until: deadline))
    }
    let start = LoopClock.Instant.now
    let found = spin(on: epoll, window: window, until: deadline)
    let end = LoopClock.Instant.now
    return SpinOutcome(
      ran: true, found: found, interval: traced ? (start, end) : nil,
      began: learning ? start : nil, foundAt: learning && found != nil ? end : nil)
  }

  /// Spins (checking the wake flag at every turn and the mode's epoll set every few turns)
  /// until work shows up or the window ends. Returns the epoll events if any arrived, an empty
  /// list if a wake-up was posted, or nil when the window passed with nothing to do.
  func spin(
    on epoll: Epoll, window: Duration?, until deadline: LoopClock.Instant?
  ) -> [Epoll.Event]? {
    let start = LoopClock.Instant.now
    let windowEnd = window.map { start.advanced(by: $0) } ?? .distantFuture
    let end = min(windowEnd, deadline ?? .distantFuture)
    var turn = 0
    while true {
      if wakePending.load(ordering: .acquiring) || wakeAsked.load(ordering: .acquiring) {
        return []
      }
      if posted.mayHaveWaiting { return [] }
      // A syscall per turn would slow the spin that posters of blocks rely on; descriptors
      // and timers can afford a few turns' delay.
      if turn % 16 == 0 {
        if let found = lookOnce(at: epoll) { return found }
        if LoopClock.Instant.now >= end { return nil }
      }
      turn &+= 1
    }
  }

  /// Events from one look at `epoll` that does not sleep, or nil when none is ready.
  private func lookOnce(at epoll: Epoll) -> [Epoll.Event]? {
    guard let count = try? epoll.wait(timeoutNanoseconds: 0), count > 0 else { return nil }
    return (0..<count).map(epoll.event)
  }
}
