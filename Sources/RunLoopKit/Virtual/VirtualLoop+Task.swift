import Synchronization

/// `runTask`: async code run on a virtual loop, with the clock moved for it.
///
/// The task prefers the loop's executor, so its code — and every child task, and every actor
/// without an executor of its own that it calls (SE-0417) — runs on the loop while the calling
/// thread drives it. The drive is `runUntilIdle` then, when the task has not ended, one step
/// of the clock to the mode's next timer, as tokio's paused clock auto-advances. Work that
/// only another thread can bring (a job from an actor on another loop, a descriptor written
/// elsewhere) is waited for in real time, at most `limit` at a stretch.
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
    requireTaskMode(mode)
    let giveUp = LoopClock.Instant.now.advanced(by: budget)
    let outcome = TaskOutcome<Success>()
    let task = start(body, reportingTo: outcome)
    return try virtualClock.driving(loop) { () throws -> Success in
      while true {
        switch driveTask(outcome, in: mode, until: giveUp) {
        case .ended(let result): return try result.get()
        case .ranTooLong: throw stall(task, outcome, mode, .ranTooLong(budget))
        case .waitsForOtherThreads: break
        }
        // While a resumption is away the wait is for it, and lasts a grace at most; its
        // count coming back wakes the wait (`LoopExecutor.enqueue`).
        let holding = virtualClock.hasResumptionsAway
        let grace = holding ? min(limit, Self.resumptionGrace) : limit
        let until = min(giveUp, LoopClock.Instant.now.advanced(by: grace))
        if loop.waitForOutsideWork(in: mode, until: until) { continue }
        if holding {
          virtualClock.forgetResumptionsAway()
          continue
        }
        if LoopClock.Instant.now >= giveUp { continue }  // the drive reports it
        throw stall(task, outcome, mode, .nothingCame(limit))
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
    requireTaskMode(mode)
    let giveUp = LoopClock.Instant.now.advanced(by: budget)
    let token = virtualClock.reserve()
    defer { virtualClock.release(token) }
    let outcome = TaskOutcome<Success>()
    let task = start(body, reportingTo: outcome)
    return try await withTaskCancellationHandler {
      var waitingSince: LoopClock.Instant?
      while true {
        switch driveTask(outcome, in: mode, until: giveUp, token: token) {
        case .ended(let result): return try result.get()
        case .ranTooLong: throw stall(task, outcome, mode, .ranTooLong(budget), token: token)
        case .waitsForOtherThreads: break
        }
        // Once the caller is cancelled its sleeps end at once: wait a millisecond blocking
        // then, rather than spin until the task has seen the cancellation.
        let now = LoopClock.Instant.now
        let until = Task.isCancelled ? now.advanced(by: .milliseconds(1)) : now
        let came = virtualClock.driving(loop, token: token) {
          loop.waitForOutsideWork(in: mode, until: until)
        }
        if came {
          waitingSince = nil
          continue
        }
        let since = waitingSince ?? now
        waitingSince = since
        let waited = since.duration(to: now)
        if virtualClock.hasResumptionsAway, waited >= min(limit, Self.resumptionGrace) {
          virtualClock.forgetResumptionsAway()
          waitingSince = nil
          continue
        }
        if waited >= limit {
          throw stall(task, outcome, mode, .nothingCame(limit), token: token)
        }
        if !Task.isCancelled { try? await Task.sleep(for: .microseconds(100)) }
      }
    } onCancel: {
      task.cancel()
    }
  }

  /// How long a resumption that left for Swift's global executor may take to come back before
  /// `runTask` moves the clock anyway (it may never come: see `forgetResumptionsAway`).
  static let resumptionGrace = Duration.seconds(1)

  /// Starts `body` as a task preferring the loop's executor; its first job waits in the
  /// loop's queue until the loop is driven.
  private func start<Success: Sendable>(
    _ body: sending @escaping () async throws -> Success,
    reportingTo outcome: TaskOutcome<Success>
  ) -> Task<Void, Never> {
    Task(executorPreference: loop.executor) {
      do {
        outcome.finish(.success(try await body()))
      } catch {
        outcome.finish(.failure(error))
      }
    }
  }

  /// What a drive of `runTask`'s loop came to.
  private enum Drive<Success> {
    case ended(Result<Success, any Error>)
    /// Nothing ready, no timer ahead (or a resumption away): only another thread can help.
    case waitsForOtherThreads
    /// The call's real-time budget ran out while the clock kept moving.
    case ranTooLong
  }

  /// Drives the loop until the task has ended, nothing can happen without another thread, or
  /// `giveUp` (real time) has passed: runs what is ready, then moves the clock to the mode's
  /// next timer, again and again. The clock holds while a resumption is away (`VirtualClock`).
  private func driveTask<Success>(
    _ outcome: TaskOutcome<Success>, in mode: Loop.Mode, until giveUp: LoopClock.Instant,
    token: UInt64? = nil
  ) -> Drive<Success> {
    virtualClock.driving(loop, token: token) {
      while true {
        virtualClock.driving(loop, horizon: now) { runUntilIdleWhileDriving(mode) }
        if let result = outcome.result { return .ended(result) }
        if LoopClock.Instant.now >= giveUp { return .ranTooLong }
        guard !virtualClock.hasResumptionsAway,
          let next = loop.virtualWakeDeadline(in: mode), next > now
        else { return .waitsForOtherThreads }
        advanceDriving(to: next, in: mode)
      }
    }
  }

  /// Cancels the task and lets the cancellation run: the drive goes on (the clock moving to
  /// the next timer, for a task that ends only when a timeout of its own fires) for up to
  /// `resumptionGrace` of real time, waiting for other threads too (a job that came after
  /// the `VirtualLoop` is released would trap). Then makes the error.
  private func stall<Success>(
    _ task: Task<Void, Never>, _ outcome: TaskOutcome<Success>, _ mode: Loop.Mode,
    _ reason: TaskStalled.Reason, token: UInt64? = nil
  ) -> TaskStalled {
    task.cancel()
    let giveUp = LoopClock.Instant.now.advanced(by: Self.resumptionGrace)
    while case .waitsForOtherThreads = driveTask(outcome, in: mode, until: giveUp, token: token) {
      let came = virtualClock.driving(loop, token: token) {
        loop.waitForOutsideWork(in: mode, until: giveUp)
      }
      if !came { break }
    }
    return TaskStalled(
      reason: reason, at: now, elapsed: virtualClock.start.duration(to: now), mode: mode,
      ended: outcome.result != nil)
  }

  /// `runTask`'s entry checks: a mode the task's jobs can run in, and not from code the loop
  /// is running as a job (the task's first job would wait for that one to return).
  private func requireTaskMode(_ mode: Loop.Mode) {
    Loop.requireRunnable(mode, for: "VirtualLoop.runTask")
    if virtualClock.isDrivenByCurrentThread && loop.isRunningJob {
      fatalError(
        "RunLoopKit: VirtualLoop.runTask was called from a task or actor running on this "
          + "virtual loop (inside runTask's own task, say): the new task would wait for this "
          + "one to return, which waits for it. Await the work directly instead.")
    }
    if !loop.isCommonMode(mode) {
      fatalError(
        "RunLoopKit: VirtualLoop.runTask(in: \"\(mode)\") names a mode that is not one of the "
          + "loop's common modes: the task's jobs and loop.sleep's timers are queued for the "
          + "common modes and would never run there. Run .default, or add the mode with "
          + "loop.addCommonMode first.")
    }
  }
}

/// Where `runTask`'s task leaves its result, for the driving thread to find.
final class TaskOutcome<Success: Sendable>: Sendable {
  private let stored = Mutex<Result<Success, any Error>?>(nil)

  func finish(_ result: Result<Success, any Error>) { stored.withLock { $0 = result } }

  var result: Result<Success, any Error>? { stored.withLock { $0 } }
}
