import CRunLoopShims
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// An actor pinned to any loop's executor: every job it runs, runs on that loop's thread.
actor LoopPinnedCounter {
  let executor: LoopExecutor
  private(set) var count = 0

  init(executor: LoopExecutor) { self.executor = executor }

  nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

  /// Hops off the loop's thread and back before counting, so the loop has nothing queued
  /// while the call is away.
  func incrementAfterAnAwait() async -> (count: Int, onLoopThread: Bool) {
    _ = await Task.detached { crl_gettid() }.value
    count += 1
    return (count, executor.loop.isCurrent)
  }
}

extension LoopPinnedCounter {
  /// Counts on the loop's thread with no await in between.
  func increment() -> (count: Int, onLoopThread: Bool) {
    count += 1
    return (count, executor.loop.isCurrent)
  }

  /// A job that runs its loop nested, as a modal wait does. A second job of this actor,
  /// queued before the nested run, and a plain block: `log` says what ran when.
  func runNestedLoop(log: Recorder) {
    log.log("first job begins")
    Task { self.noteSecondJob(log: log) }  // a job of this actor, queued now
    do {
      try executor.loop.perform {
        log.log("plain block in the nested run")
        Loop.current.stop()
      }
    } catch {
      log.log("perform failed: \(error)")
    }
    Loop.current.run()
    count += 10
    log.log("first job ends, count \(count)")
  }

  private func noteSecondJob(log: Recorder) {
    count += 1
    log.log("second job, count \(count)")
  }
}

/// The actor-initialiser trap the Swift concurrency article describes: stored-property
/// initialisers and a synchronous `init` run on the thread that creates the actor.
actor PinnedWithInitialisers {
  let executor: LoopExecutor
  let initialisedOn = crl_gettid()
  private(set) var madeInsideLater: pid_t?

  init(executor: LoopExecutor) { self.executor = executor }

  nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

  func makeLater() -> pid_t {
    let thread = crl_gettid()
    madeInsideLater = thread
    return thread
  }
}

/// Synchronous, so it may call `assumeIsolated`.
func countAssumingIsolation(_ counter: LoopPinnedCounter) -> Int {
  counter.assumeIsolated { $0.count }
}

extension RunLoopKitTests {
  @Suite("Every loop is an executor") struct LoopExecutors {
    @Test(
      "59. A job enqueued on loop.executor wakes an idle loop and keeps it running; no keep-alive source is needed to survive an await"
    )
    func test_59_executorJobsKeepThePlainLoopAlive() async throws {
      let result = Box<Loop.RunResult?>(nil)
      // A plain thread that runs its loop with nothing scheduled but its executor.
      let thread = LoopThread { loop in result.value = loop.run(in: .default) }
      let executor = thread.loop.executor
      thread.start()
      #expect(waitUntil { thread.loop.isWaiting })
      // An idle loop wakes for a job.
      let ranOnLoop = await Task(executorPreference: executor) { thread.loop.isCurrent }.value
      #expect(ranOnLoop)
      // 10 000 awaited calls, each of which leaves the loop with nothing queued for a while.
      let counter = LoopPinnedCounter(executor: executor)
      var wrong = 0
      for expected in 1...10_000 {
        let (count, onLoopThread) = await counter.incrementAfterAnAwait()
        if count != expected || !onLoopThread { wrong += 1 }
      }
      #expect(wrong == 0)
      #expect(result.value == nil, "the loop's run ended while the actor was in use")
      thread.loop.stop()
      thread.join()
      #expect(result.value == .stopped)
    }

    @Test(
      "60. An actor on any loop's executor: assumeIsolated passes in that loop's callbacks and fails elsewhere"
    )
    func test_60_isolationOnAPlainLoop() async throws {
      let seen = Box<Int?>(nil)
      let thread = LoopThread { loop in loop.run(in: .default, for: .seconds(10)) }
      let counter = LoopPinnedCounter(executor: thread.loop.executor)
      try thread.loop.add(
        LoopTimer(after: .milliseconds(10)) { _ in
          seen.value = countAssumingIsolation(counter)
          Loop.current.stop()
        }, to: .default)
      // Off the thread the answer is "cannot tell" (nil), so that a check that must trap
      // asks checkIsolated, whose message names both threads.
      #expect(thread.loop.executor.isIsolatingCurrentContext() == nil)
      #expect(!thread.loop.isCurrent)
      thread.start()
      thread.join()
      #expect(seen.value == 0)
    }

    @Test(
      "60. assumeIsolated for a plain loop's actor traps off that loop's thread, naming both threads"
    )
    func test_60_assumeIsolatedTrapsElsewhere() async {
      let result = await #expect(
        processExitsWith: .failure, observing: [\.standardErrorContent]
      ) {
        let thread = LoopThread { loop in loop.run(in: .default, for: .seconds(1)) }
        let counter = LoopPinnedCounter(executor: thread.loop.executor)
        _ = countAssumingIsolation(counter)
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(
        message.contains(
          "RunLoopKit: code isolated to this loop's executor (an actor pinned to it) must run on "
            + "the loop of thread "), "\(message)")
      #expect(message.contains(", but ran on thread "))
      #expect(message.contains("Call the actor with await"))
      #expect(!message.contains("Incorrect actor executor assumption"))
    }

    @Test(
      "A job a plain thread's loop accepted after its last run still runs, on that thread, as the thread exits"
    )
    func acceptedJobRunsAtThreadExit() throws {
      let runReturned = Gate()
      let exit = Gate()
      let thread = LoopThread { loop in
        loop.run()
        runReturned.open()
        exit.wait()  // the job is accepted meanwhile; the thread then exits without a run
      }
      let counter = LoopPinnedCounter(executor: thread.loop.executor)
      thread.start()
      try thread.loop.perform { Loop.current.stop() }
      #expect(runReturned.wait())
      let result = Box<(count: Int, onLoopThread: Bool)?>(nil)
      let done = Gate()
      Task.detached {
        result.value = await counter.increment()
        done.open()
      }
      // Accepted: queued on the loop, which no run will drain.
      #expect(waitUntil { thread.loop.lock.withLock { thread.loop.queuedBlockCountLocked } == 1 })
      exit.open()
      thread.join()
      #expect(done.wait(), "the awaiting task was never resumed")
      #expect(result.value?.count == 1)
      #expect(result.value?.onLoopThread == true)
    }

    @Test("A job enqueued on a loop's executor after its thread exited traps with a message")
    func jobAfterThreadExitTraps() async {
      let result = await #expect(
        processExitsWith: .failure, observing: [\.standardErrorContent]
      ) {
        let executor = try onLoopThread { loop in loop.executor }
        _ = await LoopPinnedCounter(executor: executor).increment()
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(message.contains("RunLoopKit: a job was enqueued on the loop of thread "))
      #expect(message.contains("after the thread exited"))
      #expect(message.contains("Keep the thread"))
    }

    @Test(
      "A nested run inside a loop executor's job runs plain blocks but no other job of that loop; the job waiting runs after it"
    )
    func test_92_nestedRunInsideAJobHoldsOtherJobs() async throws {
      let thread = LoopThread { loop in loop.run() }
      let counter = LoopPinnedCounter(executor: thread.loop.executor)
      thread.start()
      let log = Recorder()
      await counter.runNestedLoop(log: log)
      #expect(waitUntil { log.all.count == 4 })
      #expect(
        log.all == [
          "first job begins", "plain block in the nested run", "first job ends, count 10",
          "second job, count 11",
        ])
      try thread.loop.perform { Loop.current.stop() }
      thread.join()
    }

    @Test(
      "An actor's stored-property initialisers run on the creating thread, its methods on the loop")
    func actorInitialisersRunOnTheCreatingThread() async throws {
      let thread = try ResidentThread(name: "init-trap")
      let loopThread = try thread.performAndWait { crl_gettid() }
      let actor = PinnedWithInitialisers(executor: thread.executor)
      #expect(actor.initialisedOn == crl_gettid())
      #expect(actor.initialisedOn != loopThread)
      #expect(await actor.makeLater() == loopThread)
      thread.stop()
      try thread.join()
    }

    @Test("ResidentThread.executor is its loop's executor, not a second implementation")
    func residentExecutorIsTheLoopExecutor() throws {
      let thread = try ResidentThread(name: "same-executor")
      #expect(thread.executor === thread.loop.executor)
      thread.stop()
      try thread.join()
    }
  }
}
