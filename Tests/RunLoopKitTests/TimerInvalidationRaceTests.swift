import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// Issue 28, defect 1 (checklist line 90): `invalidate()` marks a timer invalid under the
/// timer's own lock and detaches it under the loop's. A callout that ended between the two
/// left the timer's slot in its mode while it was in no heap and not firing, where teardown
/// could not see it; the loop's thread then exited and freed the mode, and the invalidating
/// thread followed the slot into freed memory. Each test holds the invalidating thread at that
/// point (a pause point compiled only for tests) while the callout ends and the thread exits.
extension RunLoopKitTests {
  @Suite("Invalidating a timer while it fires and its thread exits") struct TimerInvalidationRace {
    /// What a forced race left behind.
    struct Outcome {
      /// Slots the timer still had once its callout was over, before the thread exited.
      var slotsAfterCallout: Int
      var validAfterwards: Bool
      var fires: Int
    }

    /// A loop thread fires `timer` once; in the handler, another thread calls `invalidate`
    /// and is held after marking the timer invalid; the handler returns, the run ends and the
    /// thread exits (tearing its loop down); only then does the invalidating thread go on.
    static func invalidateDuringCallout(
      repeating: Bool, invalidate: @escaping @Sendable (LoopTimer) -> Void
    ) throws -> Outcome {
      let inHandler = Gate()
      let finishHandler = Gate()
      let fires = Counter()
      let timer = try LoopTimer(after: .zero, repeating: repeating ? .milliseconds(10) : nil) {
        _ in
        fires.increment()
        inHandler.open()
        finishHandler.wait()
        Loop.current.stop()
      }
      let slots = Box(-1)
      let loopThread = TestThread {
        let loop = Loop.current
        try? loop.add(timer, to: .default)
        loop.run(for: .seconds(10))
        slots.value = loop.lock.withLock { timer.slots.count }
      }
      #expect(inHandler.wait())
      let held = holdAt(.timerInvalidatedNotYetDetached, for: timer)
      defer { TestPausePoint.disarm(.timerInvalidatedNotYetDetached, for: timer) }
      let invalidator = TestThread { invalidate(timer) }
      #expect(held.arrived.wait())
      finishHandler.open()
      loopThread.join()  // the loop is torn down: its modes are gone
      held.release.open()
      invalidator.join()
      return Outcome(
        slotsAfterCallout: slots.value, validAfterwards: timer.isValid,
        fires: fires.value)
    }

    @Test(
      "90. A repeating timer invalidated from another thread while it fires, its thread then exiting, is detached by the loop and touches no freed memory"
    )
    func test_90_repeatingTimerInvalidatedWhileFiring() throws {
      let outcome = try Self.invalidateDuringCallout(repeating: true) { $0.invalidate() }
      #expect(outcome.slotsAfterCallout == 0, "the timer kept a slot out of every heap")
      #expect(!outcome.validAfterwards)
      #expect(outcome.fires == 1)
    }

    @Test(
      "90. A one-shot timer invalidated from another thread while it fires, its thread then exiting, is detached by the loop"
    )
    func test_90_oneShotTimerInvalidatedWhileFiring() throws {
      let outcome = try Self.invalidateDuringCallout(repeating: false) { $0.invalidate() }
      #expect(outcome.slotsAfterCallout == 0, "the timer kept a slot out of every heap")
      #expect(!outcome.validAfterwards)
      #expect(outcome.fires == 1)
    }

    @Test(
      "90. ScheduledBlock.cancel() winning against a firing block, its thread then exiting: cancelled, never run, nothing freed touched"
    )
    func test_90_scheduledBlockCancelledAsItFires() throws {
      let ran = Counter()
      let scheduled = Box<ScheduledBlock?>(nil)
      let aboutToFire = Gate()
      let proceed = Gate()
      let ready = Gate()
      let slots = Box(-1)
      let loopThread = TestThread {
        let loop = Loop.current
        let block = try? loop.perform(after: .zero) { ran.increment() }
        scheduled.value = block
        if let block {
          TestPausePoint.arm(.timerAboutToFire, for: block.timer) {
            aboutToFire.open()
            proceed.wait()
          }
        }
        ready.open()
        loop.run(for: .seconds(10))
        slots.value = loop.lock.withLock { block?.timer.slots.count ?? -1 }
      }
      #expect(ready.wait())
      let block = try #require(scheduled.value)
      defer {
        TestPausePoint.disarm(.timerAboutToFire, for: block.timer)
        TestPausePoint.disarm(.timerInvalidatedNotYetDetached, for: block.timer)
      }
      #expect(aboutToFire.wait())  // out of its heaps, its handler not called yet
      let held = holdAt(.timerInvalidatedNotYetDetached, for: block.timer)
      let cancelled = Box<Bool?>(nil)
      let canceller = TestThread { cancelled.value = block.cancel() }
      #expect(held.arrived.wait())  // claimed as cancelled, marked invalid, not detached
      proceed.open()
      loopThread.join()
      held.release.open()
      canceller.join()
      #expect(cancelled.value == true)
      #expect(block.state == .cancelled)
      #expect(ran.value == 0)
      #expect(slots.value == 0, "the timer kept a slot out of every heap")
    }

    @Test(
      "90. Stress, unforced: 2 000 rounds of a timer invalidated or cancelled from another thread while it fires and its thread exits"
    )
    func test_90_invalidationRacingFiringAndTeardown() throws {
      for round in 0..<2000 {
        let fires = Counter()
        let kind = round % 3
        let timer = try LoopTimer(
          after: .zero, repeating: kind == 1 ? nil : .microseconds(20)
        ) { _ in
          if fires.increment() >= 3 { Loop.current.stop() }
        }
        let scheduled = Box<ScheduledBlock?>(nil)
        let started = Gate()
        let loopBox = Box<Loop?>(nil)
        let loopThread = TestThread {
          let loop = Loop.current
          loopBox.value = loop
          if kind == 2 {
            scheduled.value = try? loop.perform(after: .zero) { fires.increment() }
          }
          try? loop.add(timer, to: .default)
          started.open()
          // A round whose timer is gone before it fired has an empty mode, but nothing wakes
          // the loop to notice (as in CF): the deadline ends that run.
          loop.run(for: .milliseconds(20))
        }
        let invalidator = TestThread {
          started.wait()
          // Lets the loop reach its first callout now and then, at varying points.
          let giveUp = LoopClock.Instant.now.advanced(by: .seconds(2))
          while fires.value < round % 2 && LoopClock.Instant.now < giveUp {
            sched_yield()
          }
          if let block = scheduled.value { block.cancel() }
          timer.invalidate()
        }
        invalidator.join()
        loopThread.join()
        #expect(!timer.isValid)
        // What the race used to leave: a slot, in no heap, on a mode teardown freed.
        let loop = try #require(loopBox.value)
        let leftover = loop.lock.withLock { timer.slots.count }
        #expect(leftover == 0, "round \(round) left the timer with a slot")
        if leftover != 0 { break }
      }
    }

    @Test(
      "An invalid timer ignores a new fire date or tolerance, as CFRunLoopTimerSetNextFireDate does"
    )
    func invalidTimerIgnoresScheduleChanges() throws {
      let date = LoopClock.Instant.now.advanced(by: .seconds(60))
      let unbound = try LoopTimer(fireAt: date, tolerance: .milliseconds(1)) { _ in }
      unbound.invalidate()
      unbound.fireDate = date.advanced(by: .seconds(60))
      unbound.tolerance = .seconds(5)
      #expect(unbound.fireDate == date)
      #expect(unbound.tolerance == .milliseconds(1))

      let bound = try LoopTimer(fireAt: date) { _ in }
      let next = try onLoopThread { loop -> LoopClock.Instant? in
        try loop.add(bound, to: .default)
        bound.invalidate()
        bound.fireDate = .now
        return loop.nextTimerFireDate(in: .default)
      }
      #expect(bound.fireDate == date)
      #expect(next == nil)
    }
  }
}
