import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Virtual time: who drives, and waiting for other threads") struct VirtualDriving {
    @Test("runUntil returns as soon as another thread's port message arrives, not at its limit")
    func runUntilWakesForAPort() throws {
      let virtual = VirtualLoop()
      var received: [Int] = []
      let port = try virtual.loop.assumeIsolated().addPort(of: Int.self) { received.append($0) }
      let sender = TestThread { try? port.send(7) }
      let wallStart = LoopClock.Instant.now
      let arrived = virtual.runUntil({ !received.isEmpty }, waitingAtMost: .seconds(30))
      sender.join()
      #expect(arrived)
      #expect(received == [7])
      #expect(elapsed(since: wallStart) < .seconds(15), "woken by the message, not the limit")
      #expect(virtual.now == VirtualLoop.defaultStart, "and the clock did not move")
    }

    @Test("runUntil returns as soon as another thread's block arrives, after a stale wake-up")
    func runUntilWakesForABlock() throws {
      let virtual = VirtualLoop()
      let ran = Box(false)
      virtual.loop.wakeUp()  // nobody runs it: dropped, and must not swallow the next wake
      virtual.runUntilIdle()
      let poster = TestThread { try? virtual.loop.perform { ran.value = true } }
      let wallStart = LoopClock.Instant.now
      #expect(virtual.runUntil({ ran.value }, waitingAtMost: .seconds(30)))
      poster.join()
      #expect(elapsed(since: wallStart) < .seconds(15))
    }

    @Test("A virtual loop driven from another's callout is current there; the outer one after")
    func nestedDrivesOfTwoLoops() throws {
      let outer = VirtualLoop()
      let inner = VirtualLoop()
      var seen: [String] = []
      func name(_ loop: Loop) -> String {
        loop === outer.loop ? "outer" : loop === inner.loop ? "inner" : "other"
      }
      try inner.loop.assumeIsolated().perform { seen.append("inner: \(name(Loop.current))") }
      try outer.loop.assumeIsolated().perform {
        seen.append("outer: \(name(Loop.current))")
        inner.runUntilIdle()
        seen.append("outer again: \(name(Loop.current))")
      }
      outer.runUntilIdle()
      #expect(seen == ["outer: outer", "inner: inner", "outer again: outer"])
      #expect(name(Loop.current) == "other", "the test thread's own loop answers again")
    }

    @Test("advance ends at its target even when an entry observer stops every run")
    func advanceWithStoppedRuns() throws {
      let virtual = VirtualLoop()
      let view = virtual.loop.assumeIsolated()
      try view.addManualSource {}
      try view.addObserver(.entry) { _, _ in Loop.current.stop() }
      virtual.advance(by: .seconds(5))
      #expect(virtual.now == VirtualLoop.defaultStart.advanced(by: .seconds(5)))
    }

    @Test("A VirtualLoop call in a callout may not carry the clock past the call in progress")
    func nestedAdvancePastTargetTraps() async {
      let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
        func nested() throws {
          let virtual = VirtualLoop()
          try virtual.loop.assumeIsolated().addTimer(after: .seconds(1)) { _ in
            virtual.advance(by: .seconds(5))
          }
          virtual.advance(by: .seconds(2))
        }
        try nested()
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(message.contains("past t+2.0 seconds"), "\(message)")
    }

    @Test("advance(in: .common) traps: .common is a set of modes, never run itself")
    func commonIsNotAMode() async {
      let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
        VirtualLoop().advance(by: .seconds(1), in: .common)
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(message.contains("VirtualLoop.advance(in: .common)"), "\(message)")
    }
  }
}
