import Foundation
import Testing

@testable import RunLoopKit

/// Checklist line 104: `signalAndWake()` wakes only a loop that says it sleeps; a busy or
/// spinning loop finds the signal count moved by itself. Each test would hang (and fail on its
/// bound) if a wake-up were lost.
extension RunLoopKitTests {
  @Suite("signalAndWake leaves a loop that is awake to find the signal") struct SignalWakeTests {
    @Test(
      "104. 20 000 times, a thread signals and wakes a source of a loop that goes back to sleep in between: every signal is performed, none is lost to a loop about to sleep"
    )
    func test_104_noSignalLostToALoopAboutToSleep() throws {
      let rounds = 20_000
      let performed = DispatchSemaphore(value: 0)
      let count = Box(0)
      let slot = Box<ManualSource?>(nil)
      let thread = LoopThread { loop in
        let source = ManualSource {
          count.value += 1
          if count.value == rounds { loop.stop() }
          performed.signal()
        }
        try? loop.add(source, to: .default)
        slot.value = source
        performed.signal()
        loop.run(for: .seconds(60))
        source.invalidate()
      }
      thread.start()
      performed.wait()
      let source = try #require(slot.value)
      var lost = 0
      for _ in 0..<rounds {
        source.signalAndWake()
        // Sometimes right away (the loop still busy with the last one), sometimes asleep.
        if performed.wait(timeout: .now() + 10) == .timedOut {
          lost += 1
          break
        }
      }
      thread.join()
      #expect(lost == 0)
      #expect(count.value == rounds)
    }

    @Test(
      "104. A loop spinning with nothing to do (busy-wait policy) ends its spin for a signalAndWake from another thread and performs the source, sending no wake-up"
    )
    func test_104_spinEndsOnSignal() throws {
      let performed = DispatchSemaphore(value: 0)
      let ready = DispatchSemaphore(value: 0)
      let slot = Box<ManualSource?>(nil)
      let thread = LoopThread { loop in
        loop.waitPolicy = .busyWait
        let source = ManualSource {
          performed.signal()
          loop.stop()
        }
        try? loop.add(source, to: .default)
        slot.value = source
        ready.signal()
        loop.run(for: .seconds(30))
        source.invalidate()
      }
      thread.start()
      ready.wait()
      let loop = thread.loop
      let source = try #require(slot.value)
      // Spinning: the loop has been waiting for work for a while (no sleep under busy-wait).
      #expect(waitUntil { loop.metrics.passes >= 1 })
      usleep(20_000)
      source.signalAndWake()
      #expect(performed.wait(timeout: .now() + 10) == .success)
      thread.join()
      #expect(loop.metrics.wakeUpWrites == 0)
      #expect(loop.metrics.wakes.wakeUp == 0)
    }

    @Test(
      "104. A signal for a source of another mode wakes a loop asleep in a mode with no manual source, as a wake-up would"
    )
    func test_104_signalOfAnotherModeEndsAWait() throws {
      let other = Loop.Mode("other-104")
      let signalled = DispatchSemaphore(value: 0)
      let slot = Box<ManualSource?>(nil)
      let result = Box<Loop.RunResult?>(nil)
      let thread = LoopThread { loop in
        let elsewhere = ManualSource {}
        try? loop.add(elsewhere, to: other)
        slot.value = elsewhere
        // The default mode holds only a timer far away: the run sleeps until told otherwise.
        let timer = try? LoopTimer(after: .seconds(60)) { _ in }
        if let timer { try? loop.add(timer, to: .default) }
        let observer = LoopObserver(activities: .afterWaiting) { _, _ in loop.stop() }
        try? loop.add(observer, to: .default)
        signalled.signal()
        result.value = loop.run(for: .seconds(30))
        observer.invalidate()
        timer?.invalidate()
        elsewhere.invalidate()
      }
      thread.start()
      signalled.wait()
      let source = try #require(slot.value)
      #expect(waitUntil { thread.loop.isWaiting })
      source.signalAndWake()
      thread.join()
      #expect(result.value == .stopped)
    }
  }
}
