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
/// One job at a time: a job that runs a nested loop does not see other jobs of this loop
/// (its own actor's, the main actor's on `Loop.main`) run inside it; they wait until it
/// returns. Plain callbacks still run there. (See Loop+ExecutorJobs.swift.)
///
/// When the thread exits: the jobs already accepted run on it first, like every block its
/// loop accepted; a job enqueued after that traps with a message, since it can be neither
/// refused (the runtime has no way to hear it) nor run elsewhere (its actor is pinned here).
///
/// Isolation: `checkIsolated` and `isIsolatingCurrentContext` hold on the loop's own thread,
/// inside jobs and plain loop callbacks alike, so `assumeIsolated` works in a timer or source
/// callback of that loop, and anywhere else traps with a message naming both threads.
///
/// Mirrors no CF type (CF predates Swift executors); it is the Linux counterpart of pinning an
/// actor to a run loop's thread.
public final class LoopExecutor: SerialExecutor, TaskExecutor, Sendable {
  /// Held strongly: an executor outlives neither its uses nor its loop, and the loop drops its
  /// own reference when its thread exits, so the two never leak each other.
  public let loop: Loop

  init(loop: Loop) { self.loop = loop }

  /// Queues the job like a `perform` block in the loop's common modes and wakes the loop; it
  /// runs on the loop's thread, in FIFO order, never inside another job of this loop. Traps
  /// once the loop's thread has exited.
  public func enqueue(_ job: consuming ExecutorJob) {
    // Once queued, the job may run at once on the loop's thread, end its task and let go of
    // this executor and its loop before this call returns: nothing of `self` is touched after
    // the enqueue. A virtual loop, which has something to do after it, is held here first
    // (a retain a loop of a thread does not pay).
    let virtual = loop.virtualClock == nil ? nil : Unmanaged.passRetained(loop)
    do throws(LoopError) {
      try loop.enqueueJob(UnownedJob(job))
    } catch {
      // A job cannot be refused or run elsewhere without breaking the actor's isolation.
      if loop.isVirtual {
        fatalError(
          "RunLoopKit: a job was enqueued on a VirtualLoop's executor after the VirtualLoop was "
            + "released (\(error)): a task still ran or slept on it. Let such tasks finish "
            + "first (advance the clock, then runUntil { … } until they are done), or cancel "
            + "them and let the cancellation arrive, before the VirtualLoop goes.")
      }
      fatalError(
        "RunLoopKit: a job was enqueued on the loop of \(loop.threadDescription) after the thread "
          + "exited (\(error)). Keep the thread (a ResidentThread, or a thread that runs its "
          + "loop) alive for as long as actors or tasks use its executor.")
    }
    guard let virtual else { return }
    let held = virtual.takeRetainedValue()
    // After the job is queued: a driver that then sees no resumption away finds it.
    if held.virtualClock?.jobArrived() == true { held.wakeUp() }
  }

  /// This executor as an `UnownedSerialExecutor`, for an actor's `unownedExecutor`.
  public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
    UnownedSerialExecutor(ordinary: self)
  }

  /// True when `other` runs its jobs on the same loop, and so on the same thread.
  public func isSameExclusiveExecutionContext(other: LoopExecutor) -> Bool {
    loop === other.loop
  }

  /// Traps unless called on the loop's thread, naming both threads. The runtime calls it when
  /// `isIsolatingCurrentContext` cannot tell (off the loop's thread, see there) and the check
  /// must trap: `assumeIsolated`, `preconditionIsolated`.
  public func checkIsolated() {
    guard !loop.isCurrent else { return }
    loop.trapOffThread(
      "code isolated to this loop's executor (an actor pinned to it)",
      advice: "Call the actor with await from here (its executor hops to that thread), or "
        + "assume its isolation only in that loop's own callbacks.")
  }

  /// True on the loop's thread; nil elsewhere rather than false. On false the runtime traps in
  /// `assumeIsolated` with its generic "Incorrect actor executor assumption"; on nil it calls
  /// `checkIsolated` (whose message names both threads and what to do) when it must trap, and
  /// answers "not isolated" when it only asks (Swift 6.3.1's `swift_task_isCurrentExecutor`).
  public func isIsolatingCurrentContext() -> Bool? {
    loop.isCurrent ? true : nil
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
