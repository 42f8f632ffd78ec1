/// Delayed, cancellable blocks: one call instead of a `LoopTimer` plus `add`. The
/// counterparts are Foundation's `Timer.scheduledTimer(withTimeInterval:repeats:block:)`,
/// Looper's `postDelayed` and SwiftNIO's `scheduleTask(in:)`; CF itself needs a one-shot
/// `CFRunLoopTimer` for this.
extension Loop {
  /// Runs `block` once on the loop's thread, no earlier than `delay` from now, the next time
  /// the loop runs one of `modes` (by default the common modes) after that. A delay of zero
  /// or less runs it on the next pass. Safe from any thread.
  ///
  /// The block is a one-shot `LoopTimer` labelled "perform(after:)" (that is the name traces
  /// show); it keeps its modes alive until it runs or is cancelled. If the loop's thread
  /// exits before the block has run, it does not run and its handle says `.abandoned`.
  ///
  /// - Returns: a handle whose `cancel()` prevents the block from any thread and reports
  ///   whether it will not run.
  /// - Throws: `LoopError.loopTornDown` if the thread already exited, `.invalidMode` for an
  ///   empty mode name, `.invalidArgument` for an empty list of modes.
  @discardableResult
  public func perform(
    after delay: Duration, in modes: [Mode] = [.common], _ block: sending @escaping () -> Void
  ) throws(LoopError) -> ScheduledBlock {
    try schedule(block, at: instant(after: delay), in: modes)
  }

  /// Runs `block` once on the loop's thread at `deadline` or later; a deadline in the past
  /// runs it on the next pass. Otherwise as `perform(after:in:_:)`.
  @discardableResult
  public func perform(
    at deadline: LoopClock.Instant, in modes: [Mode] = [.common],
    _ block: sending @escaping () -> Void
  ) throws(LoopError) -> ScheduledBlock {
    try schedule(block, at: deadline, in: modes)
  }

  /// `perform(at:in:_:)` for every caller, the resident thread's included: a `sending` block
  /// needs no further proof once it is here, so nothing below has to carry that proof.
  func schedule(
    _ block: @escaping () -> Void, at deadline: LoopClock.Instant, in modes: [Mode],
    releasesOnLoopThread: Bool = false
  ) throws(LoopError) -> ScheduledBlock {
    try Loop.checkRunnable(modes)
    let outcome = ScheduledBlock.Outcome()
    let watch = ScheduledBlock.AbandonWatch(outcome)
    // Joins every mode while it cannot fire, then gets its date: with the date set first, the
    // loop could run the block after the first add and a later add could still throw.
    let timer = try LoopTimer(
      label: "perform(after:)", firstFireAt: .distantFuture,
      releasesOnLoopThread: releasesOnLoopThread
    ) { _ in
      // The one compare-and-swap that decides between running and a racing cancel().
      guard watch.outcome.claim(.ran) else { return }
      block()
    }
    do {
      for mode in modes { try add(timer, to: mode) }
    } catch {
      timer.invalidate()
      throw error
    }
    timer.fireDate = deadline
    return ScheduledBlock(deadline: deadline, outcome: outcome, timer: timer)
  }
}
