/// Executor jobs on a loop, and the one rule they share with the main dispatch queue: a loop
/// runs one job at a time.
///
/// A job is the work of a serial executor served by the loop — `LoopExecutor` (an actor
/// pinned to the loop, a task preferring it) and, on `Loop.main`, `LoopMainExecutor` (the
/// main actor) — and a drain of `DispatchQueue.main`. A serial executor must never start a
/// job while one of its jobs is running, or an actor's state could be changed under code
/// that holds it (Swift's exclusivity checks abort on exactly that). So while a job runs on
/// the loop's thread, a run nested inside it (the job calls `run`) sets other jobs aside and
/// leaves the main queue alone; they run, in the order queued, once the job returns. Plain
/// `perform` blocks, timers, sources and observers still run in the nested run. CF keeps the
/// same rule for its main queue: it never serves it from a run nested inside a main-queue
/// callout.
///
/// A job that runs a nested loop must therefore not wait there for another job of the same
/// loop (a task that resumes on this executor, a main-actor job): that job waits for it.
extension Loop {
  /// What `runAsJob` keeps, on the loop's thread only.
  struct JobState {
    /// Executor jobs and main-queue drains under way, nested runs included.
    var depth = 0
    /// Executor jobs a run nested inside a job took from the queue and set aside, in order.
    var held: [QueuedBlock] = []
    /// A run nested inside a job found the main queue with work and left it for later.
    var mainQueueHeld = false
    /// `executorStorage`, read under the lock by the first job and kept here so that later
    /// jobs take no lock (dropped at teardown, like `executorStorage`).
    var executor: LoopExecutor?
  }

  /// Queues an executor job (common modes, FIFO with `perform` blocks) and wakes the loop.
  /// `run` runs the job; the loop counts it as running for as long as it takes.
  ///
  /// - Throws: `LoopError.loopTornDown` once the loop's thread has exited (and, when it
  ///   exited, its final drain has run: see `runAcceptedWorkBeforeExit`).
  package func enqueueJob(_ run: @escaping () -> Void) throws(LoopError) {
    // Unowned: a queued block never outlives its loop (run, or released at teardown).
    try enqueue(QueuedBlock(modes: .executorJob(nil)) { [unowned self] in runAsJob(run) })
  }

  /// Queues a job of this loop's own executor, carried as the job itself: no allocation.
  package func enqueueJob(_ job: UnownedJob) throws(LoopError) {
    try enqueue(QueuedBlock(job: job))
  }

  /// Runs a job of this loop's own executor (queued by `enqueueJob(_:)`) as the running job,
  /// isolated to the executor as a serial executor (an actor pinned here) and a task
  /// executor (a task preferring it). A job exists only once the executor does.
  func runExecutorJob(_ job: UnownedJob) {
    let executor: LoopExecutor
    if let known = jobs.executor {
      executor = known
    } else {
      guard let stored = lock.withLock({ executorStorage }) else {
        preconditionFailure("a job of \(self) ran after its executor was dropped")
      }
      jobs.executor = stored
      executor = stored
    }
    runAsJob {
      job.runSynchronously(
        isolatedTo: executor.asUnownedSerialExecutor(),
        taskExecutor: executor.asUnownedTaskExecutor())
    }
  }

  /// Runs `body` as this loop's running job: jobs and main-queue work found by runs nested
  /// inside it wait until it returns.
  func runAsJob(_ body: () -> Void) {
    jobs.depth += 1
    body()
    jobs.depth -= 1
    if jobs.depth == 0 { resumeHeldJobs() }
  }

  /// For a drain: while a job runs, executor jobs just taken from the queue are set aside
  /// (in order) instead of run. Returns how many.
  func holdJobsIfInsideJob(_ taken: inout [QueuedBlock]) -> Int {
    guard jobs.depth > 0, taken.contains(where: \.isExecutorJob) else { return 0 }
    let set = taken.filter(\.isExecutorJob)
    jobs.held += set
    taken.removeAll(where: \.isExecutorJob)
    return set.count
  }

  /// For the main-queue source: true (and remembered) when a job is running, so the queue is
  /// served once that job returns instead of from inside it.
  func holdMainQueueIfInsideJob() -> Bool {
    guard jobs.depth > 0 else { return false }
    jobs.mainQueueHeld = true
    return true
  }

  /// The outermost job returned: jobs set aside go back to the front of the queue (they are
  /// older than anything posted since), and main-queue work seen meanwhile wakes the loop
  /// again.
  private func resumeHeldJobs() {
    if !jobs.held.isEmpty {
      var held: [QueuedBlock] = []
      swap(&held, &jobs.held)
      let signal = lock.withLock { () -> WakeSignal in
        blocks.insert(contentsOf: held, at: 0)
        return requestWakeLocked()
      }
      send(signal)
    }
    if jobs.mainQueueHeld {
      jobs.mainQueueHeld = false
      // The nested run reset the main queue's eventfd (level-triggered epoll would have
      // spun); set it again so the next pass serves the queue.
      try? EventFD.signal(MainQueueHooks.handle)
    }
  }
}
