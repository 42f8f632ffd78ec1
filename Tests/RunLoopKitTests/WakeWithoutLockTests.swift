import Foundation
import Testing

@testable import RunLoopKit

/// Checklist line 105: `wakeUp()` of a loop that is not asleep takes no lock (it leaves a flag
/// that the loop's wait reads before it sleeps, once more after saying so), and no wake-up is
/// lost to it: a loop that sleeps is woken as before.
extension RunLoopKitTests {
  @Suite("A wake-up of a loop that is not asleep takes no lock") struct WakeWithoutLockTests {
    @Test(
      "105. wakeUp() returns while another thread holds the loop's lock when the loop is not asleep, and the run after it still waits out its time"
    )
    func test_105_wakeOfBusyLoopTakesNoLock() throws {
      try onLoopThread { loop in
        let keepAlive = ManualSource {}
        try loop.add(keepAlive, to: .default)
        let returned = Gate()
        loop.lock.lock()
        let waker = TestThread {
          loop.wakeUp()
          returned.open()
        }
        // With the lock held here, a wake-up that needed it could not return.
        let done = returned.wait(seconds: 10)
        loop.lock.unlock()
        waker.join()
        #expect(done, "wakeUp() waited for the loop's lock")
        // Asked for while no run was active: dropped, as CF's is.
        let start = LoopClock.Instant.now
        #expect(loop.run(for: .milliseconds(100)) == .timedOut)
        #expect(elapsed(since: start) >= .milliseconds(100))
        keepAlive.invalidate()
      }
    }

    @Test(
      "105. A signalAndWake() made while the loop holds its lock, having decided to sleep but not yet said so, returns at once, and the loop does not sleep"
    )
    func test_105_wakeBetweenDecisionAndSleepIsSeen() throws {
      let source = Box<ManualSource?>(nil)
      let outcome = Box<(Loop.RunResult, Duration)?>(nil)
      let thread = LoopThread { loop in
        let start = LoopClock.Instant.now
        let result = loop.run(for: .seconds(20), returnAfterSourceHandled: true)
        outcome.value = (result, elapsed(since: start))
      }
      let made = ManualSource {}
      try thread.loop.add(made, to: .default)
      source.value = made
      let (arrived, release) = holdAt(.sleepDecided, for: thread.loop)
      thread.start()
      #expect(arrived.wait())
      TestPausePoint.disarm(.sleepDecided, for: thread.loop)
      // The loop holds its lock until `release` opens: a wake-up that needed it would wait.
      let returned = Gate()
      let waker = TestThread {
        source.value?.signalAndWake()
        returned.open()
      }
      let wokeWithoutLock = returned.wait(seconds: 10)
      release.open()
      waker.join()
      thread.join()
      #expect(wokeWithoutLock, "signalAndWake() waited for the loop's lock")
      let (result, took) = try #require(outcome.value)
      #expect(result == .handledSource)
      #expect(took < .seconds(10), "the loop slept through the wake-up: \(took)")
      made.invalidate()
    }

    @Test(
      "105. 20 000 signalAndWake() calls from another thread, each racing the loop into its sleep, each end a run that waits at most 20 s"
    )
    func test_105_noWakeIsLostToTheFlag() throws {
      let rounds = 20_000
      let results = Box([Loop.RunResult]())
      let turn = Box<ManualSource?>(nil)
      let ready = DispatchSemaphore(value: 0)
      let finished = Gate()
      let thread = LoopThread { loop in
        let source = ManualSource {}
        try? loop.add(source, to: .default)
        turn.value = source
        var seen: [Loop.RunResult] = []
        for _ in 0..<rounds {
          ready.signal()
          let result = loop.run(for: .seconds(20), returnAfterSourceHandled: true)
          seen.append(result)
          if result != .handledSource { break }
        }
        source.invalidate()
        results.value = seen
        finished.open()
      }
      thread.start()
      for _ in 0..<rounds {
        // No wait on the loop: the signal lands anywhere from before the run to its sleep.
        guard ready.wait(timeout: .now() + 30) == .success else { break }
        turn.value?.signalAndWake()
      }
      #expect(finished.wait(seconds: 60))
      thread.join()
      let seen = results.value
      #expect(seen.count == rounds)
      #expect(
        seen.allSatisfy { $0 == .handledSource }, "a run ended \(seen.last.map { "\($0)" } ?? "-")")
    }
  }
}
