import Dispatch
import Glibc
import Synchronization
import Testing

@testable import RunLoopKit

/// Issue 44, defects 3, 4 and 5 (checklist lines 98 and 99): what ends `runUntil`'s wait for
/// other threads, a wait that never spins, and auto-advance held to the limit of the call in
/// progress. "Asleep" is never guessed by sleeping: the other thread waits until the loop says
/// it waits (`isWaiting`).
extension RunLoopKitTests {
  @Suite("Virtual time: waiting for other threads, and the limits of a call")
  struct VirtualOutsideWork {
    /// The CPU time the calling thread has used.
    static func threadCPUTime() -> Duration {
      var time = timespec()
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
      return .seconds(time.tv_sec) + .nanoseconds(time.tv_nsec)
    }

    @Test("98. perform(after: .zero) from another thread ends runUntil's wait, and the block runs")
    func test_98_delayedBlockDueNowWakesRunUntil() throws {
      let virtual = VirtualLoop()
      let ran = Box(false)
      let poster = TestThread {
        _ = waitUntil(seconds: 30) { virtual.loop.isWaiting }
        _ = try? virtual.loop.perform(after: .zero) { ran.value = true }
      }
      let wallStart = LoopClock.Instant.now
      let arrived = virtual.runUntil({ ran.value }, waitingAtMost: .seconds(10))
      poster.join()
      #expect(arrived)
      #expect(elapsed(since: wallStart) < .seconds(5), "woken by the timer, not the limit")
      #expect(virtual.now == VirtualLoop.defaultStart)
    }

    @Test("98. A timer another thread moves to now ends runUntil's wait and fires")
    func test_98_timerMovedToNowWakesRunUntil() throws {
      let virtual = VirtualLoop()
      let fired = Box(false)
      let timer = try LoopTimer(fireAt: .distantFuture) { _ in fired.value = true }
      try virtual.loop.add(timer, to: .default)
      let mover = TestThread {
        _ = waitUntil(seconds: 30) { virtual.loop.isWaiting }
        timer.fireDate = virtual.now
      }
      let wallStart = LoopClock.Instant.now
      #expect(virtual.runUntil({ fired.value }, waitingAtMost: .seconds(10)))
      mover.join()
      #expect(elapsed(since: wallStart) < .seconds(5))
    }

    @Test(
      "98. A task on the global executor that sleeps zero on the loop and then sets a flag ends runUntil"
    )
    func test_98_zeroSleepFromTheGlobalExecutor() throws {
      let virtual = VirtualLoop()
      let done = Atomic<Bool>(false)
      let loop = virtual.loop
      Task.detached {
        _ = waitUntil(seconds: 30) { loop.isWaiting }
        try? await loop.sleep(for: .zero)
        done.store(true, ordering: .releasing)
      }
      let wallStart = LoopClock.Instant.now
      let finished = virtual.runUntil(
        { done.load(ordering: .acquiring) }, waitingAtMost: .seconds(10))
      #expect(finished)
      #expect(elapsed(since: wallStart) < .seconds(5))
    }

    @Test(
      "98. A condition another thread makes true with nothing posted is noticed long before the limit"
    )
    func test_98_conditionWithNothingPosted() throws {
      let virtual = VirtualLoop()
      try virtual.loop.add(ManualSource {}, to: .default)
      let flag = Atomic<Bool>(false)
      let setter = TestThread {
        _ = waitUntil(seconds: 30) { virtual.loop.isWaiting }
        flag.store(true, ordering: .releasing)
      }
      let wallStart = LoopClock.Instant.now
      #expect(virtual.runUntil({ flag.load(ordering: .acquiring) }, waitingAtMost: .seconds(10)))
      setter.join()
      #expect(elapsed(since: wallStart) < .seconds(5))
    }

    @Test("98. runUntil on an empty mode after a wakeUp() nobody answered waits without spinning")
    func test_98_staleWakeUpDoesNotSpin() throws {
      let virtual = VirtualLoop()
      virtual.loop.wakeUp()  // nobody drives the loop: a wake-up asked for, not yet answered
      var looks = 0
      let cpuStart = Self.threadCPUTime()
      let wallStart = LoopClock.Instant.now
      let met = virtual.runUntil(
        {
          looks += 1
          return false
        }, waitingAtMost: .seconds(1))
      let cpu = Self.threadCPUTime() - cpuStart
      #expect(!met)
      #expect(elapsed(since: wallStart) >= .seconds(1))
      // One look per millisecond at most, not one per turn of a spinning loop.
      #expect(looks < 5_000, "\(looks) looks at the condition in one second")
      #expect(cpu < .milliseconds(500), "\(cpu) of CPU in one second of waiting")
    }

    @Test("98. A source signalled before it joins the mode runUntil waits in ends the wait")
    func test_98_signalledSourceJoiningWakesRunUntil() throws {
      let virtual = VirtualLoop()
      let count = Counter()
      let source = ManualSource { _ = count.increment() }
      source.signal()
      let adder = TestThread {
        _ = waitUntil(seconds: 30) { virtual.loop.isWaiting }
        try? virtual.loop.add(source, to: .default)
      }
      let wallStart = LoopClock.Instant.now
      #expect(virtual.runUntil({ count.value == 1 }, waitingAtMost: .seconds(10)))
      adder.join()
      source.invalidate()
      #expect(elapsed(since: wallStart) < .seconds(5))
    }

    @Test(
      "99. With auto-advance, a run nested in a callout moves the clock within advance(to:)'s target"
    )
    func test_99_autoAdvanceNestedRunWithinTarget() throws {
      let virtual = VirtualLoop(autoAdvance: true)
      let start = virtual.now
      let view = virtual.loop.assumeIsolated()
      var log: [String] = []
      try view.addManualSource(to: "modal") {}
      try view.addTimer(after: .seconds(1)) { _ in
        let result = Loop.current.run(in: "modal", for: .milliseconds(500))
        log.append("modal \(result) at \(start.duration(to: virtual.now))")
      }
      try view.addTimer(after: .milliseconds(1_200)) { _ in
        log.append("second timer at \(start.duration(to: virtual.now))")
      }
      virtual.advance(to: start.advanced(by: .seconds(2)))
      #expect(virtual.now == start.advanced(by: .seconds(2)))
      #expect(log == ["modal timedOut at 1.5 seconds", "second timer at 1.5 seconds"])
    }

    @Test(
      "99. With auto-advance, a run nested in a callout that would carry the clock past advance(to:)'s target traps, saying so"
    )
    func test_99_autoAdvanceNestedRunPastTargetTraps() async {
      let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
        func nested() throws {
          let virtual = VirtualLoop(autoAdvance: true)
          let view = virtual.loop.assumeIsolated()
          try view.addManualSource(to: "modal") {}
          try view.addTimer(after: .seconds(1)) { _ in
            Loop.current.run(in: "modal", for: .seconds(10))
          }
          try view.addTimer(after: .seconds(3)) { _ in }
          virtual.advance(to: virtual.now.advanced(by: .seconds(2)))
          // Before the fix: advance returned with the clock at t+11 s.
          print("advance returned at \(virtual.now)")
        }
        try nested()
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(message.contains("may only reach t+2.0 seconds"), "\(message)")
      #expect(message.contains("auto-advance moves the clock only up to that limit"), "\(message)")
    }
  }
}
