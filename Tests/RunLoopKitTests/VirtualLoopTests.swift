import Glibc
import Testing

@testable import RunLoopKit

/// Offsets from a virtual loop's start, in whole milliseconds, for readable expectations.
func milliseconds(_ instant: LoopClock.Instant, since start: LoopClock.Instant) -> Int64 {
  start.duration(to: instant).saturatedNanoseconds / 1_000_000
}

extension RunLoopKitTests {
  @Suite("Virtual time: VirtualLoop") struct VirtualTime {
    @Test("76. A VirtualLoop runs the loop's own phases, in CF order, and its clock stands still")
    func test_76_samePhasesClockStandsStill() throws {
      let virtual = VirtualLoop()
      let start = virtual.now
      var seen: [String] = []
      let view = virtual.loop.assumeIsolated()
      try view.addObserver(.all) { _, activity in seen.append("\(activity)") }
      try view.addTimer(label: "t", after: .seconds(2)) { _ in seen.append("timer") }
      try view.perform { seen.append("block") }
      // Real time passes; the virtual clock does not.
      let wallStart = LoopClock.Instant.now
      while elapsed(since: wallStart) < .milliseconds(20) {}
      #expect(virtual.now == start)
      virtual.advance(by: .seconds(2))
      #expect(
        seen == [
          "entry", "beforeTimers", "beforeSources", "block", "beforeWaiting", "afterWaiting",
          "timer", "exit",
        ], "one pass that sleeps until the timer, as CFRunLoop orders it")
      #expect(virtual.now == start.advanced(by: .seconds(2)))
    }

    @Test("76. Items of another mode do not run; a run of a mode of its own moves the clock too")
    func test_76_modesStillApply() throws {
      let virtual = VirtualLoop()
      var fired: [String] = []
      let view = virtual.loop.assumeIsolated()
      try view.addTimer(label: "other", after: .seconds(1), to: "other") { _ in fired.append("o") }
      try view.addTimer(label: "default", after: .seconds(1)) { _ in fired.append("d") }
      virtual.advance(by: .seconds(5))
      #expect(fired == ["d"], "the timer of mode other never ran")
      virtual.advance(by: .zero, in: "other")
      #expect(fired == ["d", "o"], "it was due all along, and runs once its mode runs")
    }

    @Test("76. Nothing sleeps in real time: an hour of one-second ticks takes a blink")
    func test_76_noRealSleep() throws {
      let virtual = VirtualLoop()
      var ticks = 0
      try virtual.loop.assumeIsolated().addTimer(after: .seconds(1), repeating: .seconds(1)) {
        _ in ticks += 1
      }
      let wallStart = LoopClock.Instant.now
      virtual.advance(by: .seconds(3600))
      #expect(ticks == 3600)
      #expect(elapsed(since: wallStart) < .seconds(10), "generous: a real hour would be 3600 s")
      #expect(virtual.loop.metrics.timeAsleep == .seconds(3600), "the sleeps were virtual")
    }

    @Test("77. 10 000 timers at random instants in one hour fire in deadline order at their dates")
    func test_77_tenThousandTimers() throws {
      let virtual = VirtualLoop()
      let start = virtual.now
      var generator = SystemRandomNumberGenerator()
      var dates: [LoopClock.Instant] = []
      var firings: [(date: LoopClock.Instant, now: LoopClock.Instant)] = []
      let view = virtual.loop.assumeIsolated()
      for _ in 0..<10_000 {
        let offset = Int64.random(in: 1...3_600_000_000_000, using: &generator)
        let date = start.advanced(by: .nanoseconds(offset))
        dates.append(date)
        try view.addTimer(fireAt: date) { timer in
          firings.append((timer.fireDate, virtual.now))
        }
      }
      let wallStart = LoopClock.Instant.now
      virtual.advance(by: .seconds(3600))
      let wall = elapsed(since: wallStart)
      #expect(firings.count == 10_000)
      #expect(firings.map(\.date) == dates.sorted(), "in deadline order")
      #expect(firings.allSatisfy { $0.date == $0.now }, "now equals each timer's fire date")
      #expect(virtual.now == start.advanced(by: .seconds(3600)), "then now is the target")
      #expect(wall < .seconds(20), "an hour simulated in \(wall) of wall time")
    }

    @Test("77. A repeating timer fires exactly 10 times in 10.5 s, each on its grid")
    func test_77_repeatingTimerTenTimes() throws {
      let virtual = VirtualLoop()
      let start = virtual.now
      var fired: [Int64] = []
      // Handlers read the loop's clock, not the VirtualLoop's: a repeating timer that held
      // the VirtualLoop would keep it, and so itself, alive (see the DocC article's rules).
      let loop = virtual.loop
      try loop.assumeIsolated().addTimer(after: .seconds(1), repeating: .seconds(1)) { _ in
        fired.append(milliseconds(loop.now, since: start))
      }
      virtual.advance(by: .milliseconds(10_500))
      #expect(fired == (1...10).map { Int64($0) * 1000 })
      #expect(virtual.now == start.advanced(by: .milliseconds(10_500)))
      #expect(virtual.loop.nextTimerFireDate(in: .default) == start.advanced(by: .seconds(11)))
    }

    @Test("77. A handler that runs long keeps the timer on its grid; tolerance shares a wake")
    func test_77_gridAndTolerance() throws {
      let virtual = VirtualLoop()
      let start = virtual.now
      var log: [String] = []
      let view = virtual.loop.assumeIsolated()
      // Tolerance: A (100 ms, +50 ms allowed) waits for B (120 ms): one wake at 120 ms.
      try view.addTimer(label: "A", after: .milliseconds(100), tolerance: .milliseconds(50)) {
        _ in log.append("A@\(milliseconds(virtual.now, since: start))")
      }
      try view.addTimer(label: "B", after: .milliseconds(120)) { _ in
        log.append("B@\(milliseconds(virtual.now, since: start))")
      }
      virtual.advance(by: .milliseconds(200))
      #expect(log == ["A@120", "B@120"])
      #expect(virtual.loop.metrics.wakes.timer == 1, "one wake for both")

      // Catch-up: a handler whose nested run takes 2.5 virtual seconds makes the 1 s timer
      // fire once for the grid points it missed, then go on from the next point of its grid.
      log = []
      var first = true
      let timerStart = virtual.now
      let loop = virtual.loop
      try view.addTimer(label: "grid", after: .seconds(1), repeating: .seconds(1)) { _ in
        log.append("grid@\(milliseconds(loop.now, since: timerStart))")
        if first {
          first = false
          Loop.current.run(in: "busy", for: .milliseconds(2500))
        }
      }
      try view.addTimer(label: "keeps busy alive", after: .seconds(60), to: "busy") { _ in }
      virtual.advance(by: .seconds(6))
      #expect(log == ["grid@1000", "grid@4000", "grid@5000", "grid@6000"])
    }

    @Test("78. Delays count from the virtual now: LoopTimer(after:) from its add, perform(after:)")
    func test_78_delaysFromVirtualNow() throws {
      let virtual = VirtualLoop()
      let start = virtual.now
      let log = Recorder()
      virtual.advance(by: .seconds(100))
      // Made before the clock moves again, added after: counts from the add.
      let timer = try LoopTimer(label: "late add", after: .seconds(5)) { _ in log.log("timer") }
      virtual.advance(by: .seconds(10))
      try virtual.loop.add(timer, to: .default)
      #expect(timer.fireDate == start.advanced(by: .seconds(115)))
      let handle = try virtual.loop.perform(after: .seconds(3)) { log.log("block") }
      #expect(handle.deadline == start.advanced(by: .seconds(113)))
      virtual.advance(by: .seconds(2.999))
      #expect(log.all.isEmpty)
      virtual.advance(by: .milliseconds(1))
      #expect(log.all == ["block"])
      virtual.advance(by: .seconds(2))
      #expect(log.all == ["block", "timer"])
      // A fire date set in the past means the virtual now, not the real one.
      let again = try LoopTimer(label: "past", fireAt: start) { _ in log.log("past") }
      try virtual.loop.add(again, to: .default)
      again.fireDate = start
      #expect(again.fireDate == virtual.now)
    }

    @Test("78. A nested run in a callout runs in virtual time, up to the advance's target")
    func test_78_nestedRunInVirtualTime() throws {
      let virtual = VirtualLoop()
      let start = virtual.now
      var log: [String] = []
      let view = virtual.loop.assumeIsolated()
      try view.addTimer(label: "inner", after: .seconds(2), to: "modal") { _ in
        log.append("inner@\(milliseconds(virtual.now, since: start))")
      }
      try view.addTimer(label: "outer", after: .seconds(1)) { _ in
        let result = Loop.current.run(in: "modal", for: .seconds(3))
        log.append("nested returned \(result) @\(milliseconds(virtual.now, since: start))")
      }
      virtual.advance(by: .seconds(10))
      #expect(log == ["inner@2000", "nested returned finished @2000"])
      #expect(virtual.now == start.advanced(by: .seconds(10)))
    }

    @Test("79. runUntilIdle runs blocks, sources, descriptors and due timers; the clock stays")
    func test_79_runUntilIdle() throws {
      let virtual = VirtualLoop()
      let start = virtual.now
      var log: [String] = []
      let pipe = makePipe()
      defer {
        close(pipe.read)
        close(pipe.write)
      }
      let view = virtual.loop.assumeIsolated()
      let source = try view.addManualSource(label: "m") { log.append("source") }
      try view.addSource(fileDescriptor: pipe.read) { _, _ in
        drain(pipe.read)
        log.append("pipe")
      }
      try view.addTimer(label: "now", after: .zero) { _ in
        log.append("timer")
        // Work made by work: a block that posts a block.
        try? Loop.current.assumeIsolated().perform {
          log.append("block 1")
          try? Loop.current.assumeIsolated().perform { log.append("block 2") }
        }
      }
      try view.addTimer(label: "later", after: .seconds(1)) { _ in log.append("later") }
      source.signal()
      writeByte(pipe.write)
      virtual.runUntilIdle()
      #expect(log.sorted() == ["block 1", "block 2", "pipe", "source", "timer"])
      #expect(virtual.now == start, "the clock did not move")
      let passes = virtual.loop.metrics.passes
      virtual.runUntilIdle()
      #expect(virtual.loop.metrics.passes == passes + 1, "idle: one look, nothing more")
    }

    @Test("79. step() makes exactly one pass and reports activities, callouts and wake cause")
    func test_79_step() throws {
      let virtual = VirtualLoop()
      let start = virtual.now
      let view = virtual.loop.assumeIsolated()
      try view.addTimer(label: "tick", after: .milliseconds(200)) { _ in }
      try view.perform {}
      let first = virtual.step()
      #expect(first.callouts == [.blocks(count: 1), .timer("tick", lateness: .zero)])
      #expect(
        first.activities == [
          .entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .exit,
        ])
      #expect(first.wokenBy == [.timer])
      #expect(first.slept == .milliseconds(200))
      #expect(first.result == .timedOut)
      #expect(virtual.now == start.advanced(by: .milliseconds(200)))
      #expect(virtual.loop.metrics.passes == 1, "exactly one pass")
      let second = virtual.step()
      #expect(second.result == .finished, "the mode is empty now: no pass at all")
      #expect(second.events.map(\.kind) == [.returned(.finished)])
    }
  }
}

/// Runs `body` as the thread of a fresh auto-advancing `VirtualLoop`, so the `run(for:)`
/// calls of a test whose subject is the loop's rules, not the kernel's timing, go through
/// virtual time: exact, and no real wait.
func onVirtualLoop<T>(_ body: (VirtualLoop, Loop) throws -> T) throws -> T {
  let virtual = VirtualLoop(autoAdvance: true)
  return try virtual.asCurrent { () throws -> T in try body(virtual, virtual.loop) }
}
