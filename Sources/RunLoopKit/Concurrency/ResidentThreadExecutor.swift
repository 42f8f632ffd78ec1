/// Runs Swift concurrency jobs on a resident thread, so an actor can be pinned to it (every
/// job of the actor runs on that one thread) and tasks can prefer it.
///
/// Jobs are posted like any block (FIFO, through the thread's loop), and run with the loop's
/// thread as their isolation context: `assumeIsolated` works inside plain loop callbacks on
/// that thread and traps anywhere else. Mirrors no CF type (CF predates Swift executors); it
/// is the Linux counterpart of pinning an actor to the main run loop's thread.
public final class ResidentThreadExecutor: SerialExecutor, TaskExecutor, Sendable {
  let core: ResidentThreadCore

  init(core: ResidentThreadCore) { self.core = core }

  public func enqueue(_ job: consuming ExecutorJob) {
    let unowned = UnownedJob(job)
    let serial = asUnownedSerialExecutor()
    let task = asUnownedTaskExecutor()
    do throws(LoopError) {
      try core.enqueueJob { unowned.runSynchronously(isolatedTo: serial, taskExecutor: task) }
    } catch {
      // A job cannot be refused or run elsewhere without breaking the actor's isolation.
      fatalError(
        "RunLoopKit: a job was enqueued on resident thread \"\(core.name)\" after it had "
          + "exited. Keep the ResidentThread running for as long as actors or tasks use its executor."
      )
    }
  }

  public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
    UnownedSerialExecutor(ordinary: self)
  }

  public func isSameExclusiveExecutionContext(other: ResidentThreadExecutor) -> Bool {
    core === other.core
  }

  public func checkIsolated() {
    precondition(
      core.isCurrent,
      "Expected to be on resident thread \"\(core.name)\" (the actor's executor), but running elsewhere"
    )
  }

  public func isIsolatingCurrentContext() -> Bool? {
    core.isCurrent
  }
}
