import CRunLoopShims
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// Lifecycle corners of the resident thread; each pins a bug a review found.
extension RunLoopKitTests {
  @Suite("Resident thread lifecycle corners") struct ResidentLifecycle {
    @Test("A thread the kernel refuses to create throws instead of hanging")
    func failedCreateThrows() {
      let start = LoopClock.Instant.now
      #expect(throws: LoopError.self) {
        try ResidentThread(name: "huge", stackSize: 1 << 44)
      }
      #expect(elapsed(since: start) < .seconds(5))
    }

    @Test("The smallest accepted stack (16 KiB) really runs Swift code")
    func smallestStackWorks() throws {
      let thread = try ResidentThread(name: "small", stackSize: 16 * 1024)
      let answer = try thread.performAndWait { [1, 2, 3].map { $0 * 2 }.reduce(0, +) }
      #expect(answer == 12)
      thread.stop()
      try thread.join()
    }

    @Test("Teardown may release something whose deinit calls back into the loop")
    func teardownReleasesOutsideTheLock() throws {
      final class CallsBack: Sendable {
        let loop: Loop
        init(_ loop: Loop) { self.loop = loop }
        deinit { loop.wakeUp() }
      }
      let thread = try ResidentThread(name: "teardown")
      let callsBack = CallsBack(thread.loop)
      // The loop holds the only reference to the timer, and the timer the only one to callsBack.
      try thread.loop.add(
        LoopTimer(after: .seconds(3600)) { [callsBack] _ in _ = callsBack }, to: .default)
      let start = LoopClock.Instant.now
      thread.stop()
      try thread.join()
      #expect(elapsed(since: start) < .seconds(5))
    }

    @Test("A stopped and joined thread's handle never takes a later thread for its own")
    func identitySurvivesPthreadReuse() throws {
      let first = try ResidentThread(name: "first")
      first.stop()
      try first.join()
      let second = try ResidentThread(name: "second")
      let seen = try second.performAndWait { () -> (Bool, Bool?, Bool) in
        let ranInline = (try? first.performAndWait { true }) ?? false
        return (first.isCurrent, first.executor.isIsolatingCurrentContext(), ranInline)
      }
      #expect(seen.0 == false)
      #expect(seen.1 != true)  // nil: not isolated here (a query reads it so)
      #expect(seen.2 == false)
      second.stop()
      try second.join()
    }

    @Test("stop() ends a thread that is inside a nested run of a mode that is not common")
    func stopReachesNestedRun() throws {
      let thread = try ResidentThread(name: "modal")
      let nestedResult = Box<Loop.RunResult?>(nil)
      try thread.loop.add(ManualSource {}, to: "modal")
      let entered = Gate()  // bounded waits: a wrong interleaving fails, never hangs
      try thread.perform {
        entered.open()
        nestedResult.value = thread.loop.run(in: "modal", for: .seconds(30))
      }
      entered.wait()
      #expect(waitUntil { thread.loop.isWaiting })
      let start = LoopClock.Instant.now
      thread.stop()
      try thread.join()
      #expect(elapsed(since: start) < .seconds(5))
      #expect(nestedResult.value == .stopped)
    }

    @Test(
      "A task started on the executor after stop() but before the thread exits still runs there")
    func executorJobDuringStop() async throws {
      let thread = try ResidentThread(name: "draining")
      let release = Gate()
      try thread.perform { release.wait() }  // keep the thread busy while we stop it
      thread.stop()
      let task = Task(executorPreference: thread.executor) { crl_gettid() }
      release.open()
      let tid = await task.value
      #expect(tid == thread.threadID)
      try thread.join()
    }
  }
}
