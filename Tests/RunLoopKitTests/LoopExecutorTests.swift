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
      #expect(thread.loop.executor.isIsolatingCurrentContext() == false)
      #expect(!thread.loop.isCurrent)
      thread.start()
      thread.join()
      #expect(seen.value == 0)
      #expect(Loop.current.isCurrent)
    }

    @Test("60. assumeIsolated for a plain loop's actor traps off that loop's thread")
    func test_60_assumeIsolatedTrapsElsewhere() async {
      await #expect(processExitsWith: .failure) {
        let thread = LoopThread { loop in loop.run(in: .default, for: .seconds(1)) }
        let counter = LoopPinnedCounter(executor: thread.loop.executor)
        _ = countAssumingIsolation(counter)
      }
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
