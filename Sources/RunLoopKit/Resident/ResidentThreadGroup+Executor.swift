import Synchronization

extension ResidentThreadGroup {
  /// A `TaskExecutor` that spreads jobs over a `ResidentThreadGroup`'s threads, round-robin:
  /// under `withTaskExecutorPreference(group.executor) { … }` child tasks, `async let`s and the
  /// resumptions of the preferring tasks run on the group's threads, one job on one thread
  /// at a time, on whichever thread's turn it is (the turn `ResidentThreadGroup.next()` takes
  /// too). Like SwiftNIO's loops as task executors, or swift-platform-executors'
  /// `PThreadPoolExecutor`, which is built the same way over single-thread executors.
  ///
  /// Not a `SerialExecutor`: a task's jobs may run on different threads, one after another,
  /// so an actor cannot be pinned to it (pin it to one thread's `ResidentThread.executor`).
  /// Each job is queued on its thread's loop like an executor job of that loop's own
  /// `LoopExecutor` (common modes, FIFO with `perform` blocks, never inside another job of
  /// that loop), but it runs as a job of this executor, so what it starts prefers the group.
  ///
  /// When the threads stop: a thread keeps accepting jobs after `stop()` until its final drain
  /// finds nothing left, and runs them (a task in flight can still finish); a job refused by a
  /// thread that has exited goes to the next thread that still accepts one. Only once every
  /// thread has exited does `enqueue` trap, with a message, as a thread's own `LoopExecutor`
  /// does: a job can be neither refused (the runtime cannot hear it) nor dropped. Keep the
  /// group running for as long as tasks use its executor.
  public final class Executor: TaskExecutor, Sendable {
    private let groupName: String
    /// The threads' loops, in index order. Held strongly, as `LoopExecutor` holds its loop: a
    /// loop whose thread exited only refuses work.
    private let loops: [Loop]
    /// Whose turn is next, for `next()` and `enqueue` alike; wraps around on overflow.
    private let turn = Atomic<UInt>(0)

    init(groupName: String, loops: [Loop]) {
      precondition(!loops.isEmpty, "a ResidentThreadGroup has at least one thread")
      self.groupName = groupName
      self.loops = loops
    }

    /// The index of the thread whose turn it is, and moves the turn on: one relaxed atomic
    /// add (round-robin needs no ordering with anything else).
    func nextIndex() -> Int {
      Int(turn.wrappingAdd(1, ordering: .relaxed).oldValue % UInt(loops.count))
    }

    /// Queues the job on the next thread in turn and wakes it; the job runs there as a job of
    /// this executor. A thread that has exited passes the job to the next one; once every
    /// thread has exited, traps with a message.
    public func enqueue(_ job: consuming ExecutorJob) {
      let unowned = UnownedJob(job)
      let executor = asUnownedTaskExecutor()
      let first = nextIndex()
      for offset in 0..<loops.count {
        do throws(LoopError) {
          try loops[(first + offset) % loops.count].enqueueJob {
            unowned.runSynchronously(on: executor)
          }
          return
        } catch {
          continue  // that thread has exited: the next one may still accept it
        }
      }
      fatalError(
        "RunLoopKit: a job was enqueued on the executor of ResidentThreadGroup \"\(groupName)\" "
          + "after all \(loops.count) of its threads exited. Keep the group running (do not "
          + "stop or drop it) for as long as tasks use its executor.")
    }

    /// This executor as an `UnownedTaskExecutor`, the form the runtime keeps in a task's
    /// preference.
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
      UnownedTaskExecutor(ordinary: self)
    }
  }
}
