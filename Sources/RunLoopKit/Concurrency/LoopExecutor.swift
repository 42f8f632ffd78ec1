import CRunLoopShims

/// Runs Swift concurrency jobs on one loop's thread: a `SerialExecutor` an actor can be pinned
/// to (every job of the actor runs on that thread) and a `TaskExecutor` a task can prefer.
///
/// Every loop has one, `Loop.executor`; `ResidentThread.executor` is its loop's. Jobs are
/// queued like `perform` blocks in the common modes, in FIFO order, and wake a sleeping loop.
/// From the moment a loop hands out its executor, its common modes stay alive (as if a port
/// were scheduled there): an actor's job that awaits something elsewhere leaves nothing queued,
/// and the loop must still be there when the job resumes, so `run()` returns only when stopped.
///
/// Isolation: `checkIsolated` and `isIsolatingCurrentContext` hold on the loop's own thread,
/// inside jobs and plain loop callbacks alike, so `assumeIsolated` works in a timer or source
/// callback of that loop and traps anywhere else.
///
/// Mirrors no CF type (CF predates Swift executors); it is the Linux counterpart of pinning an
/// actor to a run loop's thread.
public final class LoopExecutor: SerialExecutor, TaskExecutor, Sendable {
  /// Held strongly: an executor outlives neither its uses nor its loop, and the loop drops its
  /// own reference when its thread exits, so the two never leak each other.
  public let loop: Loop

  init(loop: Loop) { self.loop = loop }

  /// Queues the job as a `perform` block in the loop's common modes and wakes the loop; it
  /// runs on the loop's thread, in FIFO order. Traps once the loop's thread has exited.
  public func enqueue(_ job: consuming ExecutorJob) {
    let unowned = UnownedJob(job)
    let serial = asUnownedSerialExecutor()
    let task = asUnownedTaskExecutor()
    do throws(LoopError) {
      try loop.perform { unowned.runSynchronously(isolatedTo: serial, taskExecutor: task) }
    } catch {
      // A job cannot be refused or run elsewhere without breaking the actor's isolation.
      fatalError(
        "RunLoopKit: a job was enqueued on the loop of \(loop.threadDescription) after the thread "
          + "exited (\(error)). Keep the thread (a ResidentThread, or a thread that runs its "
          + "loop) alive for as long as actors or tasks use its executor.")
    }
  }

  /// This executor as an `UnownedSerialExecutor`, for an actor's `unownedExecutor`.
  public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
    UnownedSerialExecutor(ordinary: self)
  }

  /// True when `other` runs its jobs on the same loop, and so on the same thread.
  public func isSameExclusiveExecutionContext(other: LoopExecutor) -> Bool {
    loop === other.loop
  }

  /// Traps unless called on the loop's thread. The runtime calls it for `assumeIsolated`,
  /// which therefore holds in any callback of this loop.
  public func checkIsolated() {
    loop.preconditionIsCurrent("an actor isolated to this loop's executor")
  }

  /// True on the loop's thread and false elsewhere (`Loop.isCurrent`); never nil.
  public func isIsolatingCurrentContext() -> Bool? {
    loop.isCurrent
  }
}

extension Loop {
  /// This loop's executor, for actors and tasks that must run on its thread. The first access
  /// keeps the loop's common modes alive from then on (see `LoopExecutor`).
  public var executor: LoopExecutor {
    let (executor, created) = lock.withLock { () -> (LoopExecutor, Bool) in
      if let existing = executorStorage { return (existing, false) }
      let made = LoopExecutor(loop: self)
      // After teardown the loop keeps no reference (nothing would break the cycle); jobs
      // sent to it then trap with a message.
      if !tornDown { executorStorage = made }
      return (made, !tornDown)
    }
    if created {
      // The keep-alive: a source nobody signals, like the resident thread's own.
      try? add(ManualSource(label: "executor keep-alive") {}, to: .common)
    }
    return executor
  }
}
