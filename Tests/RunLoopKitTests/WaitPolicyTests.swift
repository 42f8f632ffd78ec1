import Foundation
import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Wait policies") struct WaitPolicies {
    @Test(
      "Spinning then sleeping: posts during the window cost no eventfd write; after it the loop sleeps"
    )
    func spinThenSleep() throws {
      let thread = try ResidentThread(name: "spinner", waitPolicy: .spinThenSleep(.seconds(30)))
      #expect(thread.loop.waitPolicy == .spinThenSleep(.seconds(30)))
      let ran = Box(0)
      let writesBefore = thread.loop.metrics.wakeUpWrites
      for _ in 0..<200 {
        try thread.perform { ran.value += 1 }
        usleep(200)
      }
      #expect(waitUntil { ran.value == 200 })
      #expect(thread.loop.metrics.wakeUpWrites == writesBefore)
      #expect(!thread.loop.isWaiting)  // still inside its 30 s window, spinning
      thread.loop.waitPolicy = .spinThenSleep(.milliseconds(1))
      try thread.perform {}  // the next wait uses the short window, then sleeps
      #expect(waitUntil { thread.loop.isWaiting })
      try thread.perform { ran.value += 1 }
      #expect(waitUntil { ran.value == 201 })
      thread.stop()
      try thread.join()
    }

    @Test("Busy-waiting never sleeps, yet still serves blocks, timers and descriptors")
    func busyWait() throws {
      let thread = try ResidentThread(name: "busy", waitPolicy: .busyWait)
      let recorder = Recorder()
      try thread.loop.add(
        LoopTimer(after: .milliseconds(20)) { _ in recorder.log("timer") }, to: .default)
      try withPipe { pipe in
        let source = DescriptorSource(fileDescriptor: pipe.read) { _, _ in
          drain(pipe.read)
          recorder.log("fd")
        }
        try thread.loop.add(source, to: .default)
        writeByte(pipe.write)
        #expect(waitUntil { recorder.all.contains("fd") })
        source.invalidate()
      }
      try thread.perform { recorder.log("block") }
      #expect(waitUntil { recorder.all.contains("timer") && recorder.all.contains("block") })
      #expect(!thread.loop.isWaiting)
      #expect(thread.loop.metrics.wakeUpWrites == 0)
      thread.stop()
      try thread.join()
    }
  }
}
