import Glibc
import RunLoopKit
import Testing

extension RunLoopKitTests {
  @Suite("Ports of Darwin run-loop code") struct DarwinPorts {
    @Test(
      "113. The literal keep-alive port: a port in .default, while !stopped { run(until: .distantFuture, returnAfterSourceHandled: true) }, stopped from another thread by performAsSource, exits within a second"
    )
    func literalKeepAliveThreadStops() throws {
      let ready = Gate()
      let exited = Gate()
      let shared = Box<(Loop, LoopBoundBox<Bool>)?>(nil)
      let thread = TestThread {
        let loop = Loop.current
        // The port that keeps the loop alive (NSMachPort in the Darwin original).
        guard (try? loop.assumeIsolated().addPort(of: Int.self) { _ in }) != nil else { return }
        let stopped = LoopBoundBox(false, loop: loop)
        shared.value = (loop, stopped)
        ready.open()
        while !stopped.value {
          loop.run(in: .default, until: .distantFuture, returnAfterSourceHandled: true)
        }
        exited.open()
      }
      defer { thread.join() }
      #expect(ready.wait())
      let (loop, stopped) = try #require(shared.value)
      let asked = LoopClock.Instant.now
      try loop.performAsSource { stopped.value = true }
      let left = exited.wait(seconds: 10)
      #expect(left, "the thread left its loop")
      #expect(asked.duration(to: .now) < .seconds(1))
      if !left {
        // So that a failure fails instead of hanging the suite on the join.
        try? loop.perform { stopped.value = true }
        loop.stop()
      }
    }

    @Test(
      "113. A run with returnAfterSourceHandled returns .handledSource after a performAsSource block, not after a perform block"
    )
    func performAsSourceIsASource() throws {
      let results = try onLoopThread { loop -> [String] in
        let log = Box<[String]>([])
        let view = loop.assumeIsolated()
        try view.addPort(of: Int.self) { _ in }  // keeps .default alive
        try loop.perform { log.value.append("perform") }
        let afterBlock = loop.run(
          in: .default, for: .milliseconds(50), returnAfterSourceHandled: true)
        log.value.append("run after perform: .\(afterBlock)")
        try loop.performAsSource { log.value.append("performAsSource") }
        let afterSource = loop.run(
          in: .default, for: .seconds(10), returnAfterSourceHandled: true)
        log.value.append("run after performAsSource: .\(afterSource)")
        return log.value
      }
      #expect(
        results == [
          "perform", "run after perform: .timedOut", "performAsSource",
          "run after performAsSource: .handledSource",
        ])
    }

    @Test(
      "113. performAsSource blocks run in the order queued, only in their modes, a block given several modes once; refusals as perform's"
    )
    func orderModesAndRefusals() throws {
      let log = try onLoopThread { loop -> [String] in
        let log = Box<[String]>([])
        try loop.assumeIsolated().addPort(of: Int.self) { _ in }
        for index in 1...3 { try loop.performAsSource { log.value.append("default \(index)") } }
        try loop.performAsSource(in: Loop.Mode("tracking")) { log.value.append("tracking") }
        try loop.performAsSource(in: [.default, Loop.Mode("tracking")]) {
          log.value.append("both")
        }
        loop.run(in: .default, for: .zero)
        log.value.append("-- tracking")
        loop.run(in: Loop.Mode("tracking"), for: .zero)
        return log.value
      }
      #expect(log == ["default 1", "default 2", "default 3", "both", "-- tracking", "tracking"])

      let loop = try onLoopThread { $0 }  // its thread has exited
      #expect(throws: LoopError.invalidMode(name: "")) {
        try Loop.current.performAsSource(in: Loop.Mode("")) {}
      }
      #expect(throws: LoopError.self) { try Loop.current.performAsSource(in: []) {} }
      #expect(throws: LoopError.loopTornDown(thread: loop.threadDescription)) {
        try loop.performAsSource {}
      }
    }

    @Test(
      "113. A performAsSource block still queued when the loop's thread exits runs in its final drain"
    )
    func queuedBlocksRunBeforeExit() throws {
      let ran = Box<[String]>([])
      _ = try onLoopThread { loop in
        try loop.performAsSource { ran.value.append("default") }
        try loop.performAsSource(in: Loop.Mode("never run")) { ran.value.append("other mode") }
      }
      #expect(ran.value == ["default", "other mode"])
    }

    @Test(
      "114. loop.modes lists .default first, then every mode in the order it was made; running an empty mode makes none"
    )
    func modesInCreationOrder() throws {
      let modes = try onLoopThread { loop -> [[String]] in
        var seen: [[String]] = [loop.modes.map(\.name)]
        let view = loop.assumeIsolated()
        try view.addPort(of: Int.self, to: Loop.Mode("b")) { _ in }
        try loop.addCommonMode(Loop.Mode("a"))
        loop.run(in: Loop.Mode("empty"), for: .zero)
        try view.addTimer(after: .seconds(60), to: .default) { _ in }
        seen.append(loop.modes.map(\.name))
        return seen
      }
      #expect(modes[0] == [Loop.Mode.default.name])
      #expect(modes[1] == [Loop.Mode.default.name, "b", "a"])
    }
  }
}
