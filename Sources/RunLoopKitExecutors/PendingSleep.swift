import RunLoopKit

/// The job of one `Task.sleep` waiting on a loop timer.
///
/// If the loop's thread exits before the timer fires, the timer is invalidated and this object
/// is released without `fire()`. The job still runs then, in `deinit`, on the exiting thread:
/// a sleep that was cancelled finishes quietly (the task already resumed), and a task still
/// asleep tries to resume on the dead loop, whose executor traps with a message, rather than
/// hanging for ever unseen.
final class PendingSleep: @unchecked Sendable {  // job is taken once, on the loop's thread
  private var job: UnownedJob?
  private let executor: LoopExecutor

  init(job: UnownedJob, executor: LoopExecutor) {
    self.job = job
    self.executor = executor
  }

  /// Runs the job on the loop's thread. The job is the runtime's wake-up task for the sleep,
  /// isolated to no actor, so it runs on the loop as a task executor only.
  func fire() {
    guard let job else { return }
    self.job = nil
    // Swift 6.3.1 resumes the task through a job on the global executor, which then hops
    // back to this loop: a virtual loop's `runTask` must not move the clock meanwhile.
    executor.loop.noteResumptionLeavingThread()
    job.runSynchronously(on: executor.asUnownedTaskExecutor())
  }

  deinit { fire() }
}
