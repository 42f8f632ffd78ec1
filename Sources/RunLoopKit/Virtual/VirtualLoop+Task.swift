/// `runTask`: async code run on a virtual loop, with the clock moved for it.
///
/// The task prefers the loop's executor, so its code — and every child task, and every actor
/// without an executor of its own that it calls (SE-0417) — runs on the loop while the calling
/// thread drives it. The drive itself is `VirtualTaskDrive`: passes at the virtual now until
/// the loop is idle, then one step of the clock to the mode's next timer, as tokio's paused
/// clock auto-advances. Work that only another thread can bring (a job from an actor on
/// another loop, a descriptor written elsewhere) is waited for in real time, at most `limit`
/// at a stretch.
extension VirtualLoop {
  /// Runs `body` as a task on this virtual loop and drives the loop on the calling thread until
  /// the task ends; returns its value or rethrows its error.
  ///
  /// - The task's executor is the loop: it prefers `loop.executor`, so its code, its child
  ///   tasks and the actors it calls that have no executor of their own run on the loop,
  ///   where `Loop.current` is the virtual loop and `assumeIsolated()` holds. An actor pinned
  ///   to `loop.executor` runs there too.
  /// - When nothing on the loop is ready, the clock moves to the mode's next timer (the sleep
  ///   a real loop would make), so `loop.sleep`, `perform(after:)`, timers, `virtual.clock`
  ///   and, with RunLoopKitExecutors linked, `Task.sleep` take no real time. This auto-advance
  ///   lasts for this call only (`autoAdvance` is not changed).
  /// - When nothing is ready and no timer lies ahead, it waits in real time for what other
  ///   threads bring; after `limit` with nothing, it cancels the task and throws
  ///   `TaskStalled`, never hangs.
  ///
  /// A synchronous call, for a synchronous test; in `async` code the `async` overload is
  /// chosen, which suspends instead of blocking while it waits for other threads.
  ///
  /// - Parameters:
  ///   - limit: the longest real-time wait for work from other threads, at a stretch.
  ///   - budget: the longest the whole call may take in real time. A task that never ends
  ///     while timers keep coming (a heartbeat, a client that retries for ever) would
  ///     otherwise move the clock for ever.
  ///   - mode: the mode to run: `.default` or another common mode (the task's jobs and
  ///     `loop.sleep`'s timers are in the common modes).
  ///   - body: the task's code.
  /// - Throws: what `body` throws, or `TaskStalled` (the task cancelled first).
  public func runTask<Success: Sendable>(
    waitingAtMost limit: Duration = .seconds(10), runningAtMost budget: Duration = .seconds(60),
    in mode: Loop.Mode = .default, _ body: sending @escaping () async throws -> Success
  ) throws -> Success {
    let outcome = VirtualTaskOutcome<Success>()
    let drive = VirtualTaskDrive(
      self, mode: mode, runningAtMost: budget, token: nil,
      outcome: outcome, body)
    return try virtualClock.driving(loop) { () throws -> Success in
      while true {
        let stop = drive.drive()
        if case .ended = stop, let result = outcome.result { return try result.get() }
        if case .ranTooLong = stop { throw drive.stall(.ranTooLong(budget)) }
        if case .resumptionAway = stop, !virtualClock.hasResumptionsAway { continue }
        // While a resumption is away the wait is for it, and lasts a grace at most; its
        // count coming back wakes the wait (`LoopExecutor.enqueue`).
        let holding = virtualClock.hasResumptionsAway
        let began = LoopClock.Instant.now
        let grace = holding ? min(limit, VirtualTaskDrive.resumptionGrace) : limit
        let until = min(drive.giveUp, began.advanced(by: grace))
        if loop.waitForOutsideWork(in: mode, until: until) { continue }
        if holding {
          virtualClock.forgetResumptionsAway()
          continue
        }
        // The whole bound, unless the budget cut the wait short.
        throw drive.stall(.nothingCame(until < drive.giveUp ? limit : began.duration(to: .now)))
      }
    }
  }

  /// `runTask` for async code: the same drive, but while it waits for other threads it
  /// suspends (for 100 µs of real time at a time) instead of blocking a cooperative thread.
  /// The drive resumes on whichever thread the caller resumes on, which is then the loop's
  /// thread: views from `assumeIsolated()` stay valid across the caller's awaits. Until it
  /// returns, the loop is held for this call: another thread that tries to drive it, or to
  /// use one of its views between this call's drives, traps. Cancelling the caller cancels
  /// the task.
  public func runTask<Success: Sendable>(
    waitingAtMost limit: Duration = .seconds(10), runningAtMost budget: Duration = .seconds(60),
    in mode: Loop.Mode = .default, _ body: sending @escaping () async throws -> Success
  ) async throws -> Success {
    let token = virtualClock.reserve()
    defer { virtualClock.release(token) }
    let outcome = VirtualTaskOutcome<Success>()
    let drive = VirtualTaskDrive(
      self, mode: mode, runningAtMost: budget, token: token,
      outcome: outcome, body)
    return try await withTaskCancellationHandler {
      var waitingSince: LoopClock.Instant?
      while true {
        let stop = drive.drive()
        if case .ended = stop, let result = outcome.result { return try result.get() }
        if case .ranTooLong = stop { throw await drive.stallSuspending(.ranTooLong(budget)) }
        let now = LoopClock.Instant.now
        if drive.look() {
          waitingSince = nil
          continue
        }
        let since = waitingSince ?? now
        waitingSince = since
        let waited = since.duration(to: now)
        let grace = min(limit, VirtualTaskDrive.resumptionGrace)
        if virtualClock.hasResumptionsAway, waited >= grace {
          virtualClock.forgetResumptionsAway()
          waitingSince = nil
          continue
        }
        if waited >= limit { throw await drive.stallSuspending(.nothingCame(limit)) }
        await drive.pause()
      }
    } onCancel: {
      drive.task.cancel()
    }
  }
}
