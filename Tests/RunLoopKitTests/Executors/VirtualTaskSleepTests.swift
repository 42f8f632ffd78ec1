import Glibc
import RunLoopKit
import RunLoopKitExecutors
import Testing

extension RunLoopKitTests {
  @Suite("Task.sleep on a virtual loop") struct VirtualTaskSleep {
    @Test("78. Task.sleep on a virtual loop's executor counts from the virtual now")
    func taskSleepCountsFromVirtualNow() throws {
      let virtual = VirtualLoop()
      let (start, woke, task) = startHourLongVirtualSleep(on: virtual) { _ in
        try await Task.sleep(for: .seconds(3600))
      }
      virtual.advance(by: .seconds(1))
      // The resumption passes through Swift's global executor on its way back to the loop.
      #expect(virtual.runUntil { woke.value != nil })
      #expect(woke.value == start.advanced(by: .seconds(3600)))
      withExtendedLifetime(task) {}
    }
  }
}

extension RunLoopKitTests {
  @Suite("Task.sleep inside VirtualLoop.runTask") struct VirtualRunTaskSleep {
    @Test(
      "108. With RunLoopKitExecutors, Task.sleep inside runTask is virtual: a simulated day of sleeps, in order with the loop's later timers even when the way back is slow"
    )
    func taskSleepIsVirtual() throws {
      let virtual = VirtualLoop()
      let began = LoopClock.Instant.now
      let log = try virtual.runTask { () -> [String] in
        var log: [String] = []
        let loop = Loop.current
        let start = VirtualLoop.defaultStart
        // A timer due after the sleep ends: the sleep's way back (through Swift's global
        // executor) must arrive before the clock moves on to it.
        let fired = Box<Duration?>(nil)
        try loop.perform(after: .seconds(15)) {
          fired.value = start.duration(to: loop.now)
        }
        // Keep Swift's global executor busy for a while, so the way back is slow (it waits
        // for a free thread of the cooperative pool): the clock must wait for it.
        for _ in 0..<4 { Task.detached { usleep(50_000) } }
        // And a loop.sleep that ends in the same pass, whose job is queued from the loop's
        // own thread: it must not count as the Task.sleep's way back.
        async let sibling: Void = loop.sleep(for: .seconds(10))
        try await Task.sleep(for: .seconds(10))
        try await sibling
        log.append("woke at \(start.duration(to: loop.now)), timer fired: \(fired.value != nil)")
        for _ in 0..<24 { try await Task.sleep(for: .seconds(3600)) }
        log.append("day ends at \(start.duration(to: loop.now)), timer at \(fired.value!)")
        return log
      }
      #expect(
        log == [
          "woke at 10.0 seconds, timer fired: false",
          "day ends at 86410.0 seconds, timer at 15.0 seconds",
        ])
      #expect(began.duration(to: .now) < .seconds(5))
    }

    @Test("108. A Task.sleep cancelled inside runTask leaves the clock free to move")
    func cancelledTaskSleep() throws {
      let virtual = VirtualLoop()
      let times = try virtual.runTask { () -> [Duration] in
        let loop = Loop.current
        let start = VirtualLoop.defaultStart
        let sleeper = Task(executorPreference: loop.executor) {
          try? await Task.sleep(for: .seconds(2))
          return start.duration(to: loop.now)
        }
        try await loop.sleep(for: .seconds(1))
        sleeper.cancel()
        let cancelledAt = await sleeper.value
        // The cancelled sleep's timer still fires at 2 s and resumes nothing.
        try await loop.sleep(for: .seconds(5))
        return [cancelledAt, start.duration(to: loop.now)]
      }
      #expect(times == [.seconds(1), .seconds(6)])
    }

    @Test(
      "108. With RunLoopKitExecutors, ContinuousClock's and SuspendingClock's sleeps inside runTask are virtual too"
    )
    func clockSleepsAreVirtual() throws {
      let virtual = VirtualLoop()
      let began = LoopClock.Instant.now
      let after = try virtual.runTask { () -> Duration in
        try await ContinuousClock().sleep(for: .seconds(3600))
        try await SuspendingClock().sleep(for: .seconds(3600))
        return VirtualLoop.defaultStart.duration(to: Loop.current.now)
      }
      #expect(after == .seconds(7200))
      #expect(began.duration(to: .now) < .seconds(5))
    }
  }
}
