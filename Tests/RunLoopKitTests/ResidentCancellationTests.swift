import Dispatch
import Foundation
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Resident thread and task cancellation") struct ResidentCancellation {
    @Test(
      "62. A task cancelled before its ResidentThread.run body starts gets CancellationError and the body never runs"
    )
    func test_62_cancelledBeforeTheBodyStarts() async throws {
      let thread = try ResidentThread(name: "cancel")
      let ran = Box(0)
      // Hold the thread, so the run's block waits in the queue while the task is cancelled.
      let busy = Gate()  // bounded waits: a wrong interleaving fails, never hangs
      let gate = Gate()
      try thread.perform {
        busy.open()
        gate.wait()
      }
      busy.wait()
      let queued = Task { try await thread.run { ran.value += 1 } }
      try await Task.sleep(for: .milliseconds(50))
      queued.cancel()
      gate.open()
      await #expect(throws: CancellationError.self) { try await queued.value }
      // Already cancelled when it calls run: nothing is even queued.
      let early = Task {
        withUnsafeCurrentTask { $0?.cancel() }
        try await thread.run { ran.value += 1 }
      }
      await #expect(throws: CancellationError.self) { try await early.value }
      // An uncancelled run still runs, and returns its value.
      #expect(try await thread.run { 42 } == 42)
      #expect(ran.value == 0)
      thread.stop()
      try thread.join()
    }
  }
}
