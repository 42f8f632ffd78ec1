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
  ///   - mode: the mode to run: `.default` (a common mode, where the task's jobs and
  ///     `loop.sleep`'s timers are).
  ///   - body: the task's code.
  /// - Throws: what `body` throws, or `TaskStalled`.
  public func runTask<Success: Sendable>(
    waitingAtMost limit: Duration = .seconds(10), in mode: Loop.Mode = .default,
    _ body: sending @escaping () async throws -> Success
  ) throws -> Success {
    Loop.requireRunnable(mode, for: "VirtualLoop.runTask")
    let outcome = TaskOutcome<Success>()
    let task = start(body, reportingTo: outcome)
    return try virtualClock.driving(loop) { () throws -> Success in
      while true {
        if let result = driveTask(outcome, in: mode) { return try result.get() }
        let grace = virtualClock.hasResumptionsAway ? min(limit, Self.resumptionGrace) : limit
        let came = loop.waitForOutsideWork(
          in: mode, until: LoopClock.Instant.now.advanced(by: grace))
        if came { continue }
        if virtualClock.hasResumptionsAway {
          virtualClock.forgetResumptionsAway()
          continue
        }
        throw stall(task, outcome, mode: mode, waited: limit)
      }
    }
  }

  /// `runTask` for async code: the same drive, but while it waits for other threads it
  /// suspends (for 100 µs of real time at a time) instead of blocking a cooperative thread.
  /// The drive resumes on whichever thread the caller resumes on, which is then the loop's
  /// thread: views from `assumeIsolated()` stay valid across the caller's awaits.
  /// Cancelling the caller cancels the task.
  public func runTask<Success: Sendable>(
    waitingAtMost limit: Duration = .seconds(10), in mode: Loop.Mode = .default,
    _ body: sending @escaping () async throws -> Success
  ) async throws -> Success {
    Loop.requireRunnable(mode, for: "VirtualLoop.runTask")
    let outcome = TaskOutcome<Success>()
    let task = start(body, reportingTo: outcome)
    return try await withTaskCancellationHandler {
      var waitingSince: LoopClock.Instant?
      while true {
        if let result = driveTask(outcome, in: mode) { return try result.get() }
        let now = LoopClock.Instant.now
        let came = virtualClock.driving(loop) { loop.waitForOutsideWork(in: mode, until: now) }
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
        if waited >= limit { throw stall(task, outcome, mode: mode, waited: limit) }
        try? await Task.sleep(for: .microseconds(100))
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

  /// Drives the loop until the task has ended (its result) or nothing can happen without
  /// another thread (nil): runs what is ready, then moves the clock to the mode's next timer,
  /// again and again. The clock holds while a resumption is away (see `VirtualClock`).
  private func driveTask<Success>(
    _ outcome: TaskOutcome<Success>, in mode: Loop.Mode
  ) -> Result<Success, any Error>? {
    virtualClock.driving(loop) {
      while true {
        virtualClock.driving(loop, horizon: now) { runUntilIdleWhileDriving(mode) }
        if let result = outcome.result { return result }
        guard !virtualClock.hasResumptionsAway,
          let next = loop.virtualWakeDeadline(in: mode), next > now
        else { return nil }
        advanceDriving(to: next, in: mode)
      }
    }
  }

  /// Cancels the stalled task, lets the cancellation run, and makes the error.
  private func stall<Success>(
    _ task: Task<Void, Never>, _ outcome: TaskOutcome<Success>, mode: Loop.Mode,
    waited: Duration
  ) -> TaskStalled {
    task.cancel()
    virtualClock.driving(loop, horizon: now) { runUntilIdleWhileDriving(mode) }
    return TaskStalled(
      at: now, elapsed: virtualClock.start.duration(to: now), mode: mode, waited: waited)
  }
}

/// Where `runTask`'s task leaves its result, for the driving thread to find.
final class TaskOutcome<Success: Sendable>: Sendable {
  private let stored = Mutex<Result<Success, any Error>?>(nil)

  func finish(_ result: Result<Success, any Error>) { stored.withLock { $0 = result } }

  var result: Result<Success, any Error>? { stored.withLock { $0 } }
}
