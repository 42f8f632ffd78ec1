import Foundation
import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Timers") struct Timers {
    @Test("30. A one-shot timer fires once, is then invalid, and a mode left empty finishes")
    func test_30_oneShot() throws {
      let fired = Box(0)
      let (result, valid) = try onLoopThread { loop in
        let timer = try LoopTimer(after: .milliseconds(20)) { _ in fired.value += 1 }
        try loop.add(timer, to: .default)
        let result = loop.run(for: .seconds(5))
        return (result, timer.isValid)
      }
      #expect(result == .finished)
      #expect(fired.value == 1)
      #expect(!valid)
    }

    @Test("31. A 100 ms repeating timer fires 3 times in 350 ms, each at its grid point")
    func test_31_repeating() throws {
      // Virtual time: the subject is the grid rule, not the kernel's timer.
      let log = Recorder()
      let (start, next) = try onVirtualLoop { virtual, loop in
        let start = loop.now
        let step = Duration.milliseconds(100)
        let timer = try LoopTimer(fireAt: start.advanced(by: step), interval: step) { timer in
          // In the callout the timer's fire date is the date being served.
          log.log(
            "fire \(milliseconds(timer.fireDate, since: start)) at \(milliseconds(loop.now, since: start))"
          )
        }
        // Told on the pass after a fire, once the loop has re-armed the timer.
        try loop.add(
          LoopObserver(activities: .beforeWaiting) { _, _ in
            log.log("armed \(milliseconds(timer.fireDate, since: start))")
          }, to: .default)
        try loop.add(timer, to: .default)
        loop.run(for: .milliseconds(350))
        defer { timer.invalidate() }
        return (start, timer.fireDate)
      }
      #expect(
        log.all == [
          "armed 100", "fire 100 at 100", "armed 200", "fire 200 at 200", "armed 300",
          "fire 300 at 300", "armed 400",
        ])
      #expect(next == start.advanced(by: .milliseconds(400)))
    }

    @Test("32. A repeating timer invalidated in its own callback fires once")
    func test_32_invalidateInCallback() throws {
      let fired = Box(0)
      let (result, valid) = try onLoopThread { loop in
        let timer = try LoopTimer(after: .milliseconds(10), repeating: .milliseconds(10)) { timer in
          fired.value += 1
          timer.invalidate()
        }
        try loop.add(timer, to: .default)
        return (loop.run(for: .seconds(5)), timer.isValid)
      }
      #expect(fired.value == 1)
      #expect(!valid)
      #expect(result == .finished)
    }

    @Test("33. A repeating timer late by 3.5 intervals fires once and stays on its original grid")
    func test_33_lateTimerStaysOnGrid() throws {
      let fired = Box<[Int64]>([])
      let (first, next) = try onVirtualLoop { virtual, loop in
        let first = loop.now.advanced(by: .milliseconds(50))
        let timer = try LoopTimer(fireAt: first, interval: .milliseconds(100)) { _ in
          fired.value.append(milliseconds(loop.now, since: first))
        }
        try loop.add(timer, to: .default)
        // The thread is busy elsewhere until 3.5 intervals after the first fire date.
        virtual.advance(by: .milliseconds(400), in: "elsewhere")
        loop.run(for: .milliseconds(20))
        defer { timer.invalidate() }
        return (first, timer.fireDate)
      }
      #expect(fired.value == [350], "once, 3.5 intervals late")
      #expect(first.duration(to: next) == .milliseconds(400), "the next point of its grid")
    }

    @Test(
      "34. A callback that sets its fire date 10 s ahead next fires then; one earlier than the date just fired is ignored for that round; a past date means now and fires on the next pass (virtual time)"
    )
    func test_34_fireDateFromCallback() throws {
      let recorder = Recorder()
      try onVirtualLoop { _, loop in
        // 10 s ahead: honoured. Its 10 ms grid would have fired about 9 more times in the run.
        let target = Box<LoopClock.Instant?>(nil)
        let postponedFires = Box(0)
        let postponing = try LoopTimer(after: .milliseconds(10), repeating: .milliseconds(10)) {
          timer in
          postponedFires.value += 1
          let date = loop.now.advanced(by: .seconds(10))
          target.value = date
          timer.fireDate = date
        }
        try loop.add(postponing, to: .default)
        #expect(loop.run(for: .milliseconds(100)) == .timedOut)
        #expect(postponedFires.value == 1)
        #expect(target.value != nil)
        #expect(postponing.fireDate == target.value)
        #expect(loop.nextTimerFireDate(in: .default) == target.value)
        // The mode's timerfd is set for that date: that is when the loop wakes to fire it.
        #expect(loop.lock.withLock { loop.modeStates[.default]!.armedDeadline } == target.value)
        postponing.invalidate()

        // Earlier than the date just fired: ignored, the timer stays on its grid. The public
        // setter turns any past date into now (the next clause), and the date just fired is
        // never after now, so the date is stored without that step, as CF's
        // `oldFireTSR < rlt->_fireTSR` test sees it.
        let served = Box<LoopClock.Instant?>(nil)
        let ignoredFires = Box(0)
        let rewound = try LoopTimer(after: .milliseconds(10), repeating: .seconds(1)) { timer in
          ignoredFires.value += 1
          let date = timer.fireDate
          served.value = date
          timer.binding.lock.withLock {
            timer.setFireDateUnlocked(date.advanced(by: .milliseconds(-5)))
          }
        }
        try loop.add(rewound, to: .default)
        #expect(loop.run(for: .milliseconds(100)) == .timedOut)
        #expect(ignoredFires.value == 1)
        if let fired = served.value {
          let next = rewound.fireDate
          #expect(next > fired)
          #expect(fired.duration(to: next).saturatedNanoseconds % 1_000_000_000 == 0)
          #expect(next <= loop.now.advanced(by: .seconds(1)))
        }
        rewound.invalidate()

        // Interval 1 s, run 300 ms: the second and third fires can only come from the past
        // dates set in the callout, each on the pass right after the one before.
        try loop.add(
          LoopObserver(activities: .beforeTimers) { _, _ in recorder.log("pass") }, to: .default)
        let first = loop.now.advanced(by: .milliseconds(10))
        let fires = Box(0)
        let rewinding = try LoopTimer(fireAt: first, interval: .seconds(1)) { timer in
          fires.value += 1
          recorder.log("fire")
          if fires.value < 3 { timer.fireDate = first.advanced(by: .milliseconds(-5)) }
        }
        try loop.add(rewinding, to: .default)
        loop.run(for: .milliseconds(300))
        rewinding.invalidate()
      }
      let log = recorder.all
      #expect(log.filter { $0 == "fire" }.count == 3)
      let firstFire = log.firstIndex(of: "fire")!
      #expect(Array(log[firstFire...].prefix(5)) == ["fire", "pass", "fire", "pass", "fire"])

      // The rule itself, for the literal case (a date earlier than the one just fired that
      // is still after now, which a loop on the real clock cannot produce): ignored, the
      // next date is the grid point; a later date is honoured.
      let fired = LoopClock.Instant(nanoseconds: 1_000_000_000)
      let interval = Duration.milliseconds(100)
      #expect(
        LoopTimer.nextFireDate(
          after: fired, current: fired.advanced(by: .milliseconds(-5)), interval: interval,
          now: fired.advanced(by: .milliseconds(-10))) == fired.advanced(by: interval))
      #expect(
        LoopTimer.nextFireDate(
          after: fired, current: fired.advanced(by: .seconds(10)), interval: interval,
          now: fired.advanced(by: .milliseconds(1))) == fired.advanced(by: .seconds(10)))
    }

    @Test("35. A fire date in the past fires on the next pass")
    func test_35_pastFireDate() throws {
      let recorder = Recorder()
      try onVirtualLoop { _, loop in
        try loop.add(ManualSource {}, to: .default)
        try loop.add(
          LoopObserver(activities: .beforeTimers) { _, _ in recorder.log("pass") }, to: .default)
        let timer = try LoopTimer(fireAt: loop.now.advanced(by: .seconds(-3600))) {
          _ in
          recorder.log("fired")
        }
        try loop.add(timer, to: .default)
        loop.run(for: .milliseconds(100))
      }
      #expect(Array(recorder.all.prefix(2)) == ["pass", "fired"])
    }

    @Test(
      "36. A .common timer fires in default and in added common modes; a default-only timer does not fire while tracking"
    )
    func test_36_commonTimerAndTracking() throws {
      let recorder = Recorder()
      try onVirtualLoop { _, loop in
        let common = try LoopTimer(after: .milliseconds(5), repeating: .milliseconds(20)) { _ in
          recorder.log("common in \(loop.currentMode!)")
        }
        let defaultOnly = try LoopTimer(after: .milliseconds(5), repeating: .milliseconds(20)) {
          _ in
          recorder.log("default-only in \(loop.currentMode!)")
        }
        try loop.add(common, to: .common)
        try loop.add(defaultOnly, to: .default)
        try loop.add(ManualSource {}, to: "tracking")
        loop.run(in: "tracking", for: .milliseconds(100))
        #expect(recorder.all.isEmpty)
        loop.run(for: .milliseconds(30), returnAfterSourceHandled: false)
        try loop.addCommonMode("tracking")
        loop.run(in: "tracking", for: .milliseconds(100))
      }
      let tracking = recorder.all.filter { $0.hasSuffix("in tracking") }
      #expect(tracking.contains("common in tracking"))
      #expect(!tracking.contains("default-only in tracking"))
      #expect(recorder.all.contains("common in default"))
      #expect(recorder.all.contains("default-only in default"))
    }

    @Test("37. A timer in modes A and B fires in either; adding it to a second loop is refused")
    func test_37_twoModesAndSecondLoop() throws {
      let recorder = Recorder()
      let timer = try LoopTimer(after: .milliseconds(5), repeating: .milliseconds(10)) { _ in
        recorder.log("fired in \(Loop.current.currentMode!)")
      }
      try onVirtualLoop { _, loop in
        try loop.add(timer, to: "A")
        try loop.add(timer, to: "B")
        loop.run(in: "A", for: .milliseconds(50))
        loop.run(in: "B", for: .milliseconds(50))
        timer.invalidate()
      }
      #expect(recorder.all.contains("fired in A"))
      #expect(recorder.all.contains("fired in B"))
      let fresh = try LoopTimer(after: .seconds(1)) { _ in }
      let first = LoopThread { _ in }
      let second = LoopThread { _ in }
      try first.loop.add(fresh, to: .default)
      #expect(throws: LoopError.boundToAnotherLoop(item: "LoopTimer")) {
        try second.loop.add(fresh, to: .default)
      }
      #expect(!second.loop.contains(fresh, in: .default))
      first.start()
      second.start()
      first.join()
      second.join()
    }

    @Test("38. Tolerance lets timers due within the window fire on one wake; no timer fires early")
    func test_38_toleranceCoalesces() throws {
      let recorder = Recorder()
      let (dates, fires) = try onVirtualLoop { _, loop in
        let start = loop.now
        let dates = [start.advanced(by: .milliseconds(50)), start.advanced(by: .milliseconds(80))]
        let fires = Box<[LoopClock.Instant]>([])
        try loop.add(
          LoopObserver(activities: .afterWaiting) { _, _ in recorder.log("wake") }, to: .default)
        try loop.add(
          LoopTimer(fireAt: dates[0], tolerance: .milliseconds(100)) { _ in
            recorder.log("early-tolerant")
            fires.value.append(loop.now)
          }, to: .default)
        try loop.add(
          LoopTimer(fireAt: dates[1], tolerance: .milliseconds(100)) { _ in
            recorder.log("later")
            fires.value.append(loop.now)
          }, to: .default)
        loop.run(for: .seconds(5))
        return (dates, fires.value)
      }
      #expect(recorder.all == ["wake", "early-tolerant", "later"])
      #expect(fires.count == 2)
      for (date, fire) in zip(dates, fires) { #expect(fire >= date) }
      // One wake, where the first timer's window closes: 50 ms + 100 ms.
      #expect(fires.allSatisfy { $0 == dates[0].advanced(by: .milliseconds(100)) })
    }

    @Test("38b. Tolerance never delays a timer whose own window closes first")
    func test_38b_toleranceRespectsStrictTimers() throws {
      let (strictDate, fire) = try onVirtualLoop { _, loop in
        let start = loop.now
        let fire = Box<LoopClock.Instant?>(nil)
        try loop.add(
          LoopTimer(fireAt: start.advanced(by: .milliseconds(10)), tolerance: .seconds(2)) { _ in },
          to: .default)
        let strict = start.advanced(by: .milliseconds(30))
        try loop.add(
          LoopTimer(fireAt: strict) { _ in
            fire.value = loop.now
            loop.stop()
          }, to: .default)
        loop.run(for: .seconds(5))
        return (strict, fire.value)
      }
      #expect(fire != nil)
      if let fire {
        #expect(fire == strictDate, "at its own date, not in the tolerant timer's window")
      }
    }

    @Test("39. nextTimerFireDate(in:) is the earliest pending fire date, nil when there is none")
    func test_39_nextTimerFireDate() throws {
      try onLoopThread { loop in
        #expect(loop.nextTimerFireDate(in: .default) == nil)
        let now = LoopClock.Instant.now
        let late = try LoopTimer(fireAt: now.advanced(by: .seconds(50))) { _ in }
        let early = try LoopTimer(fireAt: now.advanced(by: .seconds(20))) { _ in }
        try loop.add(late, to: .default)
        try loop.add(early, to: .default)
        #expect(loop.nextTimerFireDate(in: .default) == now.advanced(by: .seconds(20)))
        early.fireDate = now.advanced(by: .seconds(90))
        #expect(loop.nextTimerFireDate(in: .default) == now.advanced(by: .seconds(50)))
        late.invalidate()
        early.invalidate()
        #expect(loop.nextTimerFireDate(in: .default) == nil)
        #expect(loop.nextTimerFireDate(in: "never-used") == nil)
      }
    }

    @Test("40. 100 000 timers added and cancelled: each cancel is O(log n), no linear scan")
    func test_40_timerHeapScales() throws {
      let (moves, count, probe) = try onLoopThread { loop in
        let count = 100_000
        let base = LoopClock.Instant.now.advanced(by: .seconds(3600))
        var timers: [LoopTimer] = []
        timers.reserveCapacity(count)
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<count {
          let date = base.advanced(
            by: .nanoseconds(Int64.random(in: 0..<1_000_000_000, using: &generator)))
          let timer = try LoopTimer(fireAt: date) { _ in }
          try loop.add(timer, to: .default)
          timers.append(timer)
        }
        let heap = loop.lock.withLock { loop.modeStates[.default]!.timers }
        // Every timer knows its own heap index, so a cancel needs no search for it...
        #expect(loop.lock.withLock { heapIndicesAreRecorded(heap) })
        // ...and a cancel goes by that record alone: a timer whose record is made to point at
        // the last entry removes that entry, where a search would have found the timer itself.
        // (Booleans only under the lock: describing a timer for a failure message takes it.)
        let probe = loop.lock.withLock { () -> [Bool] in
          let entries = heap.entries
          let target = entries[0].timer
          let last = entries[entries.count - 1].timer
          target.slots.setIndex(entries.count - 1, in: heap)
          target.leaveEveryModeLocked(of: loop)
          let left = heap.entries
          let wentByRecord = [
            left.count == entries.count - 1, left[0].timer === target,
            !left.contains { $0.timer === last },
          ]
          // Repair: the last timer's record now names the target's entry, which its cancel
          // removes, so both are out and the heap is whole again.
          last.slots.setIndex(0, in: heap)
          last.leaveEveryModeLocked(of: loop)
          return wentByRecord + [
            heap.count == entries.count - 2,
            !heap.entries.contains { $0.timer === target || $0.timer === last },
            heapIndicesAreRecorded(heap),
          ]
        }
        timers.shuffle(using: &generator)
        for (index, timer) in timers.enumerated() {
          loop.remove(timer, from: .default)
          if index == count / 2 { #expect(loop.lock.withLock { heapIndicesAreRecorded(heap) }) }
        }
        let moves = loop.lock.withLock { heap.moveCount }
        #expect(loop.nextTimerFireDate(in: .default) == nil)
        #expect(loop.lock.withLock { heap.count } == 0)
        return (moves, count, probe)
      }
      #expect(Array(probe.prefix(3)) == [true, true, true], "the cancel searched for the timer")
      #expect(Array(probe.dropFirst(3)) == [true, true, true], "the heap was not repaired")
      // Sifting is bounded by log2(n) moves per insert and per removal.
      let bound = 2 * count * Int(log2(Double(count)).rounded(.up))
      #expect(moves <= bound)
    }

    @Test(
      "Fire dates in the far past fire at once; in the far future they never fire and do not break the timerfd"
    )
    func test_extremeFireDates() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        let future = try LoopTimer(fireAt: .distantFuture, interval: .seconds(1)) { _ in
          recorder.log("future")
        }
        let past = try LoopTimer(fireAt: LoopClock.Instant(nanoseconds: .min)) { _ in
          recorder.log("past")
        }
        try loop.add(future, to: .default)
        try loop.add(past, to: .default)
        #expect(loop.nextTimerFireDate(in: .default) == LoopClock.Instant(nanoseconds: .min))
        loop.run(for: .milliseconds(50))
        #expect(loop.nextTimerFireDate(in: .default) == .distantFuture)
        future.fireDate = LoopClock.Instant.now.advanced(by: .milliseconds(5))
        loop.run(for: .milliseconds(100))
        #expect(future.fireDate > .now)
        future.invalidate()
      }
      #expect(Array(recorder.all.prefix(2)) == ["past", "future"])
    }

    @Test("Timers with NaN, negative or zero intervals are refused with the value")
    func test_badIntervals() throws {
      #expect(
        throws: LoopError.invalidArgument(
          name: "timer interval", value: "nan s",
          reason: "a time in seconds must be a finite number")
      ) {
        try LoopTimer(afterSeconds: 1, repeatingEverySeconds: .nan) { _ in }
      }
      #expect(
        throws: LoopError.invalidArgument(
          name: "timer interval", value: "-1.0 seconds", reason: LoopTimer.intervalRule)
      ) {
        try LoopTimer(afterSeconds: 1, repeatingEverySeconds: -1) { _ in }
      }
      #expect(throws: LoopError.self) {
        try LoopTimer(after: .seconds(1), repeating: .zero) { _ in }
      }
      #expect(throws: LoopError.self) {
        try LoopTimer(after: .seconds(1), repeating: .seconds(-2)) { _ in }
      }
      #expect(throws: LoopError.self) { try LoopTimer(afterSeconds: .infinity) { _ in } }
      #expect(throws: LoopError.self) {
        try LoopTimer(after: .seconds(1), tolerance: .seconds(-1)) { _ in }
      }
      let huge = try LoopTimer(afterSeconds: 1, repeatingEverySeconds: 1e300) { _ in }
      #expect(huge.interval != nil)
    }
  }
}
