import CRunLoopShims
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// An actor pinned to a resident thread: every job it runs, runs there.
actor PinnedCounter {
  let thread: ResidentThread
  private(set) var count = 0

  init(thread: ResidentThread) { self.thread = thread }

  nonisolated var unownedExecutor: UnownedSerialExecutor {
    thread.executor.asUnownedSerialExecutor()
  }

  func increment() -> (count: Int, tid: pid_t) {
    count += 1
    return (count, crl_gettid())
  }
}

/// Synchronous, so it may call `assumeIsolated` (which is unavailable in async contexts).
func countAssumingIsolation(_ counter: PinnedCounter) -> Int {
  counter.assumeIsolated { $0.count }
}

extension RunLoopKitTests {
  @Suite("Resident thread executor") struct ResidentExecutor {
    @Test(
      "55. An actor on a resident thread's executor runs every job there (10 000 awaited calls)")
    func test_55_actorRunsOnThread() async throws {
      let thread = try ResidentThread(name: "actor-home")
      let counter = PinnedCounter(thread: thread)
      var wrongThread = 0
      for expected in 1...10_000 {
        let (count, tid) = await counter.increment()
        if tid != thread.threadID || count != expected { wrongThread += 1 }
      }
      #expect(wrongThread == 0)
      let preferred = await Task(executorPreference: thread.executor) { crl_gettid() }.value
      #expect(preferred == thread.threadID)
      thread.stop()
      try thread.join()
    }

    @Test(
      "55b. Isolation checks pass on the resident thread (even in a raw loop callback) and fail elsewhere"
    )
    func test_55b_isolationChecks() throws {
      let thread = try ResidentThread(name: "isolated")
      let counter = PinnedCounter(thread: thread)
      // Elsewhere: nil, which a query reads as "not isolated" and a check that must trap turns
      // into checkIsolated's trap (55c).
      #expect(thread.executor.isIsolatingCurrentContext() == nil)
      let onThread = try thread.performAndWait { thread.executor.isIsolatingCurrentContext() }
      #expect(onThread == true)
      // assumeIsolated from a plain loop callback (a timer) on the resident thread.
      let count = Box<Int?>(nil)
      try thread.loop.add(
        LoopTimer(after: .milliseconds(1)) { _ in
          count.value = countAssumingIsolation(counter)
        }, to: .default)
      #expect(waitUntil { count.value != nil })
      #expect(count.value == 0)
      thread.stop()
      try thread.join()
    }

    @Test("55c. assumeIsolated off the resident thread traps, naming both threads")
    func test_55c_assumeIsolatedElsewhereTraps() async {
      let result = await #expect(
        processExitsWith: .failure, observing: [\.standardErrorContent]
      ) {
        let thread = try ResidentThread(name: "elsewhere")
        _ = countAssumingIsolation(PinnedCounter(thread: thread))
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(
        message.contains("code isolated to this loop's executor (an actor pinned to it) must run"),
        "\(message)")
      #expect(message.contains("\"elsewhere\", but ran on thread "))
      #expect(!message.contains("Incorrect actor executor assumption"))
    }
  }
}
