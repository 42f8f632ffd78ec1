import CRunLoopShims
import Foundation
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("A resident thread's stop hooks") struct ResidentStopHooks {
    @Test(
      "53. onStop hooks run on the thread, in order, after the last block it accepted; none after stop()"
    )
    func test_53_onStopRunsLastOnTheThread() throws {
      let thread = try ResidentThread(name: "stop-hooks")
      let log = Recorder()
      let threadID = thread.threadID
      try thread.onStop {
        log.log("first hook on thread: \(crl_gettid() == threadID)")
        // The loop takes no more work by now.
        do {
          try thread.loop.perform { log.log("posted by the hook") }
        } catch {
          log.log("post refused")
        }
      }
      try thread.perform { log.log("block A") }
      try thread.onStop { log.log("second hook") }
      try thread.perform { log.log("block B") }
      thread.stop()
      #expect(throws: LoopError.stopped(thread: "stop-hooks")) {
        try thread.onStop { log.log("too late") }
      }
      try thread.join()
      #expect(
        log.all == [
          "block A", "block B", "first hook on thread: true", "post refused", "second hook",
        ])
    }
  }
}
