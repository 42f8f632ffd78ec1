import Glibc
import RunLoopKit
import Testing

extension RunLoopKitTests {
  @Suite("performAsSource on a resident thread") struct ResidentPerformAsSource {
    @Test(
      "119. ResidentThread.performAsSource runs its block on the thread as a source: a nested run with returnAfterSourceHandled returns .handledSource after it"
    )
    func runsAsASourceOnTheThread() throws {
      let thread = try ResidentThread(name: "as-source")
      defer { try? thread.join() }
      defer { thread.stop() }
      let onThread = Box<Bool?>(nil)
      let ran = Gate()
      try thread.performAsSource {
        onThread.value = thread.isCurrent
        ran.open()
      }
      #expect(ran.wait())
      #expect(onThread.value == true)

      let tracking = Loop.Mode("tracking")
      let log = try thread.performAndWait { () throws -> [String] in
        let log = Box<[String]>([])
        let loop = Loop.current
        try loop.assumeIsolated().addPort(of: Int.self, to: tracking) { _ in }
        try thread.performAsSource(in: tracking) { log.value.append("tracking block") }
        let result = loop.run(in: tracking, for: .seconds(10), returnAfterSourceHandled: true)
        log.value.append("run: .\(result)")
        return log.value
      }
      #expect(log == ["tracking block", "run: .handledSource"])
    }

    @Test(
      "119. ResidentThread.performAsSource throws .stopped naming the thread once stop() was called; a block accepted before, for a mode the thread never runs, runs in its final drain"
    )
    func stopRefusesAndFinalDrainRuns() throws {
      let thread = try ResidentThread(name: "as-source-stop")
      let ranOnThread = Box<Bool?>(nil)
      try thread.performAsSource(in: Loop.Mode("never run")) {
        ranOnThread.value = thread.isCurrent
      }
      thread.stop()
      #expect(throws: LoopError.stopped(thread: "as-source-stop")) {
        try thread.performAsSource {}
      }
      try thread.join()
      #expect(ranOnThread.value == true, "the accepted block ran on the thread before join")
    }
  }
}
