import Foundation
import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Running and results") struct Running {
    @Test(
      "5. An empty mode finishes at once and no observer is told; observers alone do not keep it alive"
    )
    func test_05_emptyModeFinishes() throws {
      let recorder = Recorder()
      let results = try onLoopThread { loop in
        let empty = loop.run(for: .seconds(5))
        try loop.add(activityLogger(recorder), to: .default)
        let start = LoopClock.Instant.now
        let withObserver = loop.run(for: .seconds(5))
        return [empty, withObserver, elapsed(since: start) < .seconds(1) ? .finished : .timedOut]
      }
      #expect(results == [.finished, .finished, .finished])
      #expect(recorder.all.isEmpty)
    }

    @Test("6. Running .common itself returns .finished")
    func test_06_runningCommonFinishes() throws {
      let result = try onLoopThread { loop in
        try loop.add(ManualSource {}, to: .common)
        return loop.run(in: .common, for: .seconds(5))
      }
      #expect(result == .finished)
    }

    @Test(
      "7. An idle mode with a never-signalled source times out after about 200 ms; beforeWaiting and afterWaiting once each"
    )
    func test_07_idleTimesOut() throws {
      let recorder = Recorder()
      let (result, took) = try onLoopThread { loop in
        try loop.add(ManualSource {}, to: .default)
        try loop.add(activityLogger(recorder), to: .default)
        let start = LoopClock.Instant.now
        return (loop.run(for: .milliseconds(200)), elapsed(since: start))
      }
      #expect(result == .timedOut)
      #expect(took >= .milliseconds(200) && took < .seconds(2))
      #expect(recorder.count(of: "beforeWaiting") == 1)
      #expect(recorder.count(of: "afterWaiting") == 1)
      #expect(
        recorder.all == [
          "entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "exit",
        ])
    }

    @Test(
      "8. A zero-length run does one pass, never sleeps and times out (or reports a handled source)"
    )
    func test_08_zeroLengthRun() throws {
      let recorder = Recorder()
      let (plain, handled, performed) = try onLoopThread { loop in
        let performed = Box(0)
        let source = ManualSource { performed.value += 1 }
        try loop.add(source, to: .default)
        try loop.add(activityLogger(recorder), to: .default)
        let plain = loop.run(for: .zero)
        source.signal()
        let handled = loop.run(for: .zero, returnAfterSourceHandled: true)
        return (plain, handled, performed.value)
      }
      #expect(plain == .timedOut)
      #expect(handled == .handledSource)
      #expect(performed == 1)
      let pass = ["entry", "beforeTimers", "beforeSources", "exit"]
      #expect(recorder.all == pass + pass)
    }

    @Test("9. stop() from another thread while the loop sleeps returns .stopped promptly")
    func test_09_stopFromOtherThread() throws {
      let result = Box<Loop.RunResult?>(nil)
      let took = Box(Duration.zero)
      let thread = LoopThread { loop in
        try? loop.add(ManualSource {}, to: .default)
        let start = LoopClock.Instant.now
        result.value = loop.run(for: .seconds(30))
        took.value = elapsed(since: start)
      }
      thread.start()
      #expect(waitUntil { thread.loop.isWaiting })
      thread.loop.stop()
      thread.join()
      #expect(result.value == .stopped)
      #expect(took.value < .seconds(5))
    }

    @Test("10. stop() while the loop is not running has no effect on the next run")
    func test_10_stopWhileNotRunningIsDropped() throws {
      let result = try onVirtualLoop { _, loop in
        try loop.add(ManualSource {}, to: .default)
        loop.stop()
        return loop.run(for: .milliseconds(50))
      }
      #expect(result == .timedOut)
    }

    @Test("11. stop() inside a nested run stops only the inner run")
    func test_11_stopInNestedRun() throws {
      let recorder = Recorder()
      let outer = try onVirtualLoop { _, loop in
        try loop.add(ManualSource {}, to: .default)
        try loop.add(ManualSource {}, to: "inner")
        try loop.perform(in: [.default]) {
          try? loop.perform(in: ["inner"]) { loop.stop() }
          let inner = loop.run(in: "inner", for: .seconds(10))
          recorder.log("inner \(inner)")
        }
        let start = loop.now
        let result = loop.run(for: .milliseconds(300))
        recorder.log("outer ran \(start.duration(to: loop.now))")
        return result
      }
      #expect(outer == .timedOut)
      #expect(recorder.all == ["inner stopped", "outer ran 0.3 seconds"], "its whole 300 ms")
    }

    @Test("12. An entry observer that calls stop() ends the run at once, and exit is still told")
    func test_12_entryObserverStops() throws {
      let recorder = Recorder()
      let result = try onLoopThread { loop in
        try loop.add(ManualSource {}, to: .default)
        try loop.add(activityLogger(recorder), to: .default)
        let stopper = LoopObserver(activities: .entry, order: 1) { _, _ in loop.stop() }
        try loop.add(stopper, to: .default)
        return loop.run(for: .seconds(10))
      }
      #expect(result == .stopped)
      #expect(recorder.all == ["entry", "exit"])
    }

    @Test("13. wakeUp() while sleeping causes one more pass and the run does not return")
    func test_13_wakeUpDoesOneMorePass() throws {
      let (result, trace) = try runWithOneWakeUp()
      #expect(result == .timedOut)
      #expect(trace == wokenOnceTrace)
    }

    @Test(
      "14. run() returns at once on an empty default mode, and keeps the thread alive with a source until stopped"
    )
    func test_14_runWithoutArguments() throws {
      let quick = try onLoopThread { loop in
        let start = LoopClock.Instant.now
        loop.run()
        return elapsed(since: start)
      }
      #expect(quick < .seconds(1))

      let returned = Box(false)
      let thread = LoopThread { loop in
        try? loop.add(ManualSource {}, to: .default)
        loop.run()
        returned.value = true
      }
      thread.start()
      #expect(waitUntil { thread.loop.isWaiting })
      usleep(100_000)
      #expect(!returned.value)
      thread.loop.stop()
      thread.join()
      #expect(returned.value)
    }

    @Test("15. isWaiting is true while blocked in the kernel and false inside every callback")
    func test_15_isWaiting() throws {
      let recorder = Recorder()
      let thread = LoopThread { loop in
        loop.run(for: .seconds(10))
      }
      let loop = thread.loop
      let check: @Sendable (String) -> Void = { label in
        recorder.log("\(label) waiting=\(loop.isWaiting)")
      }
      let source = ManualSource { check("source") }
      try loop.add(source, to: .default)
      try loop.add(
        LoopObserver(activities: .all) { _, activity in check("\(activity)") }, to: .default)
      try loop.add(LoopTimer(after: .milliseconds(20)) { _ in check("timer") }, to: .default)
      thread.start()
      #expect(waitUntil { recorder.all.contains("timer waiting=false") })
      #expect(waitUntil { loop.isWaiting })
      source.signalAndWake()
      #expect(waitUntil { recorder.all.contains("source waiting=false") })
      try loop.perform {
        check("block")
        loop.stop()
      }
      thread.join()
      #expect(!loop.isWaiting)
      #expect(recorder.all.allSatisfy { $0.hasSuffix("waiting=false") })
      #expect(recorder.all.contains("block waiting=false"))
    }

    @Test(
      "16. currentMode is the running mode inside callbacks, nil outside, restored after a nested run"
    )
    func test_16_currentMode() throws {
      let recorder = Recorder()
      let before = try onLoopThread { loop in
        let before = loop.currentMode
        try loop.add(ManualSource {}, to: "tracking")
        try loop.perform(in: [.default]) {
          recorder.log("outer \(loop.currentMode?.name ?? "nil")")
          try? loop.perform(in: ["tracking"]) {
            recorder.log("inner \(loop.currentMode?.name ?? "nil")")
          }
          loop.run(in: "tracking", for: .milliseconds(20))
          recorder.log("after nested \(loop.currentMode?.name ?? "nil")")
        }
        loop.run(for: .milliseconds(100))
        recorder.log("after run \(loop.currentMode?.name ?? "nil")")
        return before
      }
      #expect(before == nil)
      #expect(
        recorder.all == [
          "outer default", "inner tracking", "after nested default", "after run nil",
        ])
    }
  }
}
