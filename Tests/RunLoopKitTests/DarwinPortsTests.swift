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
        // Its last block run, a mode has nothing of performAsSource's left to keep it alive.
        log.value.append("then: .\(loop.run(in: Loop.Mode("tracking"), for: .zero))")
        return log.value
      }
      #expect(
        log == [
          "default 1", "default 2", "default 3", "both", "-- tracking", "tracking",
          "then: .finished",
        ])

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

extension RunLoopKitTests {
  @Suite("A repeating timer's interval can change") struct TimerIntervalChange {
    @Test(
      "115. Setting a repeating timer's interval keeps the fire date already due and restarts the grid there"
    )
    func intervalChangeRestartsTheGrid() throws {
      let virtual = VirtualLoop()
      let fires = Box<[Duration]>([])
      let loop = virtual.loop
      let timer = try loop.assumeIsolated().addTimer(
        after: .milliseconds(100), repeating: .milliseconds(100)
      ) { _ in fires.value.append(VirtualLoop.defaultStart.duration(to: loop.now)) }
      virtual.advance(by: .milliseconds(250))
      timer.interval = .milliseconds(500)
      #expect(timer.interval == .milliseconds(500))
      virtual.advance(to: VirtualLoop.defaultStart.advanced(by: .milliseconds(1400)))
      #expect(fires.value == [100, 200, 300, 800, 1300].map { .milliseconds($0) })
    }

    @Test(
      "115. Set in the timer's own callout, the next fire is still on the old grid; a fire date the callout sets wins"
    )
    func intervalChangeInsideTheCallout() throws {
      let virtual = VirtualLoop()
      let fires = Box<[Duration]>([])
      let loop = virtual.loop
      try loop.assumeIsolated().addTimer(
        after: .seconds(1), repeating: .seconds(1)
      ) { timer in
        let at = VirtualLoop.defaultStart.duration(to: loop.now)
        fires.value.append(at)
        if at == .seconds(2) { timer.interval = .seconds(5) }
        if at == .seconds(8) {
          timer.fireDate = loop.now.advanced(by: .seconds(1))
          try? timer.setInterval(.seconds(2))
        }
        if at >= .seconds(13) { timer.invalidate() }
      }
      virtual.advance(by: .seconds(20))
      #expect(fires.value == [1, 2, 3, 8, 9, 11, 13].map { .seconds($0) })
    }

    @Test(
      "115. A one-shot timer cannot become repeating, nor a repeating one one-shot, nor take an interval of zero: setInterval throws, naming the rule"
    )
    func intervalRefusals() throws {
      let oneShot = try LoopTimer(after: .seconds(1)) { _ in }
      let repeating = try LoopTimer(after: .seconds(1), repeating: .seconds(1)) { _ in }
      #expect(throws: LoopError.self) { try oneShot.setInterval(.seconds(1)) }
      #expect(throws: LoopError.self) { try repeating.setInterval(nil) }
      #expect(throws: LoopError.self) { try repeating.setInterval(.zero) }
      try oneShot.setInterval(nil)  // already one-shot: nothing to change
      let refusal = #expect(throws: LoopError.self) { try oneShot.setInterval(.seconds(1)) }
      #expect(
        "\(refusal.map { "\($0)" } ?? "")".contains("a one-shot timer cannot become repeating"))
      #expect(oneShot.interval == nil && repeating.interval == .seconds(1))
      repeating.invalidate()
      try repeating.setInterval(.seconds(3))  // an invalid timer: nothing happens
      #expect(repeating.interval == .seconds(1))
    }

    @Test("115. The interval setter traps where setInterval throws, with the error's message")
    func intervalSetterTraps() async {
      let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
        let timer = try LoopTimer(after: .seconds(1)) { _ in }
        timer.interval = .seconds(1)
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(message.contains("a one-shot timer cannot become repeating"), "\(message)")
    }

    @Test("115. Changing the interval from another thread while the loop fires the timer")
    func intervalChangedFromAnotherThread() throws {
      let thread = try ResidentThread(name: "interval")
      defer { thread.stop() }
      let fires = Box(0)
      let timer = try thread.performAndWait {
        try thread.assumeIsolated().addTimer(
          after: .milliseconds(1), repeating: .milliseconds(1)
        ) { _ in fires.value += 1 }
      }
      for step in 1...200 { timer.interval = .microseconds(500 + step) }
      #expect(waitUntil { fires.value >= 20 })
      #expect(timer.interval == .microseconds(700))
      timer.invalidate()
    }
  }
}
