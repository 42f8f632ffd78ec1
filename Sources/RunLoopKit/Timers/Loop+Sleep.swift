/// `loop.sleep`: a task suspends until one of the loop's own timers fires.
///
/// CF has no async sleep; its counterpart is a one-shot `CFRunLoopTimer` in the common modes
/// whose callout resumes the waiting code. Unlike `Task.sleep` on a loop executor, which
/// Swift 6.3.1's runtime routes through a job on the global (Dispatch) executor, the timer's
/// callout resumes the task directly: a task running on the loop (preferring its executor,
/// or isolated to an actor pinned to it) continues on the loop's thread with no job anywhere
/// else. `nonisolated(nonsending)`: the call stays on the caller's actor, so a pinned actor
/// does not hop off the loop to start the sleep. A task running elsewhere resumes on its own
/// executor, as after any continuation (a job on the global executor for a task there).
extension Loop {
  /// Suspends the calling task for `duration` on this loop's clock, resumed by a one-shot
  /// timer in the loop's common modes. The timer fires no earlier than the deadline and no
  /// later than `tolerance` past it, plus the kernel's wake latency; sleeps whose windows
  /// overlap share one wake-up. On a `VirtualLoop` the duration counts from its virtual now
  /// and the sleep ends when the clock is moved past it.
  ///
  /// - Parameters:
  ///   - duration: how long to sleep; zero or less resumes on the loop's next pass.
  ///   - tolerance: how much later than the deadline the loop may resume the task, to share
  ///     a wake-up with other timers (nil: none, like zero).
  /// - Throws: `CancellationError` when the task is cancelled: the timer is removed from
  ///   the loop at once and the task resumes without waiting for the deadline.
  ///   `LoopError.invalidArgument` for a negative tolerance, `LoopError.loopTornDown` when
  ///   the loop's thread has exited.
  public nonisolated(nonsending) func sleep(
    for duration: Duration, tolerance: Duration? = nil
  ) async throws {
    try await sleep(until: instant(after: duration), tolerance: tolerance)
  }

  /// Suspends the calling task until `deadline` on this loop's clock (see
  /// `sleep(for:tolerance:)`); a deadline already past resumes on the loop's next pass.
  public nonisolated(nonsending) func sleep(
    until deadline: LoopClock.Instant, tolerance: Duration? = nil
  ) async throws {
    // A continuation resumes its task on the generic executor first, which for an actor
    // pinned to this loop is a job on Swift's global executor (measured: one or two per
    // sleep), and only then hops back to the actor. Preferring this loop's executor makes
    // that first stop the loop itself. Only worth it on the loop's thread: a caller running
    // elsewhere resumes on its own executor anyway. Nor without an executor yet: no task
    // runs on it then, and making one would keep the loop's common modes alive for good.
    if isCurrent, let executor = lock.withLock({ executorStorage }),
      !currentTaskPrefers(executor)
    {
      try await withTaskExecutorPreference(executor) {
        try await sleepOnTimer(until: deadline, tolerance: tolerance)
      }
    } else {
      try await sleepOnTimer(until: deadline, tolerance: tolerance)
    }
  }

  /// Whether the running task prefers `executor` already (a second preference would add a
  /// hop on the way in and out: measured, four more jobs per sleep).
  private func currentTaskPrefers(_ executor: LoopExecutor) -> Bool {
    withUnsafeCurrentTask { task in
      task?.unownedTaskExecutor == executor.asUnownedTaskExecutor()
    }
  }

  private nonisolated(nonsending) func sleepOnTimer(
    until deadline: LoopClock.Instant, tolerance: Duration?
  ) async throws {
    let sleep = LoopSleep()
    try await withTaskCancellationHandler {
      try await withUnsafeThrowingContinuation { continuation in
        sleep.begin(continuation, on: self, until: deadline, tolerance: tolerance ?? .zero)
      }
    } onCancel: {
      sleep.cancel()
    }
  }
}
