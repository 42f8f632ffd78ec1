import CoreFoundation
import Foundation
import Testing

@testable import RunLoopKit

/// The same scenarios run against CFRunLoop (the oracle) and against `Loop`; the observer
/// traces, callbacks and run results must match line for line.
extension RunLoopKitTests {
  @Suite("Side by side with CFRunLoop") struct CFOracle {
    @Test("7 vs CF: idle 200 ms run with one never-signalled source")
    func test_07_matchesCF() throws {
      let ours = try ourTrace { loop, recorder in
        try loop.add(ManualSource {}, to: .default)
        recorder.log("result \(loop.run(for: .milliseconds(200)))")
      }
      let cf = cfTrace { loop, recorder in
        CFRunLoopAddSource(loop, cfSource(recorder, "source"), .defaultMode)
        recorder.log("result \(cfResult(CFRunLoopRunInMode(.defaultMode, 0.2, false)))")
      }
      #expect(ours == cf)
      #expect(ours.last == "result timedOut")
    }

    @Test("8 vs CF: zero-length runs, plain and with a signalled source")
    func test_08_matchesCF() throws {
      let ours = try ourTrace { loop, recorder in
        let source = ManualSource { recorder.log("perform source") }
        try loop.add(source, to: .default)
        recorder.log("result \(loop.run(for: .zero))")
        source.signal()
        recorder.log("result \(loop.run(for: .zero, returnAfterSourceHandled: true))")
      }
      let cf = cfTrace { loop, recorder in
        let source = cfSource(recorder, "source")
        CFRunLoopAddSource(loop, source, .defaultMode)
        recorder.log("result \(cfResult(CFRunLoopRunInMode(.defaultMode, 0, false)))")
        CFRunLoopSourceSignal(source)
        recorder.log("result \(cfResult(CFRunLoopRunInMode(.defaultMode, 0, true)))")
      }
      #expect(ours == cf)
    }

    @Test("A wake-up made while no run is active is dropped, as CFRunLoopWakeUp's is")
    func wakeUpBeforeRunIsDroppedLikeCF() throws {
      let ours = try ourTrace { loop, recorder in
        try loop.add(ManualSource {}, to: .default)
        loop.wakeUp()
        recorder.log("result \(loop.run(for: .milliseconds(200)))")
      }
      let cf = cfTrace { loop, recorder in
        CFRunLoopAddSource(loop, cfSource(recorder, "source"), .defaultMode)
        CFRunLoopWakeUp(loop)
        recorder.log("result \(cfResult(CFRunLoopRunInMode(.defaultMode, 0.2, false)))")
      }
      #expect(ours == cf)
      // One sleep, which the early wake-up did not cut short.
      #expect(ours.filter { $0 == "beforeWaiting" }.count == 1)
      #expect(ours.last == "result timedOut")
    }

    @Test("13 and 43 vs CF: a wake-up while sleeping, seen by an observer of every activity")
    func test_13_43_matchCF() throws {
      // The wake-up must land in the first sleep, well before the run's deadline, or there is
      // no wake-up in the trace to compare. An attempt whose waker came late (a loaded machine)
      // is not judged but run again with a longer run; a waker that never sees the loop asleep
      // makes every attempt late, which fails below.
      for seconds in [0.1, 0.4, 1.6] {
        if let (ours, cf) = try wakeUpWhileSleeping(runFor: seconds) {
          #expect(ours == cf)
          #expect(ours.filter { $0 == "afterWaiting" }.count == 2)
          #expect(ours.last == "result timedOut")
          return
        }
      }
      Issue.record("no attempt woke either loop in the first half of its run")
    }

    /// Both traces of one attempt at the scenario above, or nil if either waker came late.
    private func wakeUpWhileSleeping(runFor seconds: Double) throws -> ([String], [String])? {
      let length = Duration.nanoseconds(Int64(seconds * 1e9))
      let times = Box<[String: LoopClock.Instant]>([:])
      let ours = try ourTrace(
        waking: { loop in
          waitUntil { loop.isWaiting }
          loop.wakeUp()
          times.value["ours woken"] = .now
        },
        scenario: { loop, recorder in
          try loop.add(ManualSource {}, to: .default)
          times.value["ours started"] = .now
          recorder.log("result \(loop.run(for: length))")
        })
      let cf = cfTrace(
        waking: { loop in
          waitUntil { CFRunLoopIsWaiting(loop) }
          CFRunLoopWakeUp(loop)
          times.value["cf woken"] = .now
        },
        scenario: { loop, recorder in
          CFRunLoopAddSource(loop, cfSource(recorder, "source"), .defaultMode)
          times.value["cf started"] = .now
          recorder.log("result \(cfResult(CFRunLoopRunInMode(.defaultMode, seconds, false)))")
        })
      let inTime = ["ours", "cf"].allSatisfy { engine in
        guard let started = times.value["\(engine) started"],
          let woken = times.value["\(engine) woken"]
        else { return false }
        return woken <= started.advanced(by: length / 2)
      }
      return inTime ? (ours, cf) : nil
    }

    @Test("19 vs CF: two signalled sources with returnAfterSourceHandled")
    func test_19_matchesCF() throws {
      let ours = try ourTrace { loop, recorder in
        let a = ManualSource(order: 1) { recorder.log("perform a") }
        let b = ManualSource(order: 2) { recorder.log("perform b") }
        try loop.add(a, to: .default)
        try loop.add(b, to: .default)
        a.signal()
        b.signal()
        recorder.log("result \(loop.run(for: .seconds(5), returnAfterSourceHandled: true))")
        recorder.log("result \(loop.run(for: .seconds(5), returnAfterSourceHandled: true))")
      }
      let cf = cfTrace { loop, recorder in
        let a = cfSource(recorder, "a", order: 1)
        let b = cfSource(recorder, "b", order: 2)
        CFRunLoopAddSource(loop, a, .defaultMode)
        CFRunLoopAddSource(loop, b, .defaultMode)
        CFRunLoopSourceSignal(a)
        CFRunLoopSourceSignal(b)
        recorder.log("result \(cfResult(CFRunLoopRunInMode(.defaultMode, 5, true)))")
        recorder.log("result \(cfResult(CFRunLoopRunInMode(.defaultMode, 5, true)))")
      }
      #expect(ours == cf)
      #expect(ours.filter { $0.hasPrefix("perform") } == ["perform a", "perform b"])
    }

    @Test("34 vs CF: a repeating timer whose callback sets a past fire date fires again at once")
    func test_34_pastFireDateFromCallbackMatchesCF() throws {
      // Interval 1 s: every fire after the first comes from the date set in the callout, none
      // from the grid. The third fire signals a relay source, which signals a stopper, so the
      // run lasts two more passes, in either of which a fourth fire would show, and then stops;
      // no deadline is raced.
      let ours = try ourTrace { loop, recorder in
        let fires = Box(0)
        let stopper = ManualSource {
          recorder.log("perform stop")
          Loop.current.stop()
        }
        let relay = ManualSource {
          recorder.log("perform relay")
          stopper.signal()
        }
        try loop.add(stopper, to: .default)
        try loop.add(relay, to: .default)
        let first = LoopClock.Instant.now.advanced(by: .milliseconds(20))
        let timer = try LoopTimer(fireAt: first, interval: .seconds(1)) { timer in
          fires.value += 1
          recorder.log("fire \(fires.value)")
          if fires.value < 3 {
            timer.fireDate = first.advanced(by: .seconds(-10))
          } else {
            relay.signal()
          }
        }
        try loop.add(timer, to: .default)
        recorder.log("result \(loop.run(for: .seconds(10)))")
        timer.invalidate()
      }
      let cf = cfTrace { loop, recorder in
        let fires = Box(0)
        let stopper = cfSource(recorder, "stop") { CFRunLoopStop(CFRunLoopGetCurrent()) }
        let relay = cfSource(recorder, "relay") { CFRunLoopSourceSignal(stopper) }
        CFRunLoopAddSource(loop, stopper, .defaultMode)
        CFRunLoopAddSource(loop, relay, .defaultMode)
        let first = CFAbsoluteTimeGetCurrent() + 0.02
        let timer = CFRunLoopTimerCreateWithHandler(nil, first, 1, 0, 0) { timer in
          fires.value += 1
          recorder.log("fire \(fires.value)")
          if fires.value < 3 {
            CFRunLoopTimerSetNextFireDate(timer, first - 10)
          } else {
            CFRunLoopSourceSignal(relay)
          }
        }
        CFRunLoopAddTimer(loop, timer, .defaultMode)
        recorder.log("result \(cfResult(CFRunLoopRunInMode(.defaultMode, 10, false)))")
        CFRunLoopTimerInvalidate(timer)
      }
      let events = { (trace: [String]) in
        trace.filter { $0.hasPrefix("fire") || $0.hasPrefix("perform") || $0.hasPrefix("result") }
      }
      #expect(
        events(ours) == [
          "fire 1", "fire 2", "fire 3", "perform relay", "perform stop", "result stopped",
        ])
      #expect(events(ours) == events(cf))
    }
  }
}

// MARK: - Running a scenario on each engine

/// Runs `scenario` on a fresh thread's `Loop` with an observer of every activity.
private func ourTrace(
  waking: (@Sendable (Loop) -> Void)? = nil,
  scenario: @escaping @Sendable (Loop, Recorder) throws -> Void
) throws -> [String] {
  let recorder = Recorder()
  let failure = Box<String?>(nil)
  let thread = LoopThread { loop in
    do { try scenario(loop, recorder) } catch { failure.value = "\(error)" }
  }
  try thread.loop.add(activityLogger(recorder), to: .default)
  thread.start()
  waking?(thread.loop)
  thread.join()
  #expect(failure.value == nil)
  return recorder.all
}

/// Runs `scenario` on a fresh thread's CFRunLoop with an observer of every activity.
private func cfTrace(
  waking: (@Sendable (CFRunLoop) -> Void)? = nil,
  scenario: @escaping @Sendable (CFRunLoop, Recorder) -> Void
) -> [String] {
  let recorder = Recorder()
  let loopBox = Box<CFRunLoopSendable?>(nil)
  let ready = DispatchSemaphore(value: 0)
  let thread = TestThread {
    let loop = CFRunLoopGetCurrent()!
    let observer = CFRunLoopObserverCreateWithHandler(
      nil, CFRunLoopActivity.allActivities.rawValue, true, 0
    ) {
      _, activity in recorder.log(Loop.Activity(rawValue: activity.rawValue).description)
    }
    CFRunLoopAddObserver(loop, observer, .defaultMode)
    loopBox.value = CFRunLoopSendable(loop: loop)
    ready.signal()
    scenario(loop, recorder)
  }
  ready.wait()
  waking?(loopBox.value!.loop)
  thread.join()
  return recorder.all
}

/// CFRunLoop is thread-safe for the calls the tests make from other threads (wake-up, is-waiting).
struct CFRunLoopSendable: @unchecked Sendable {  // CF locks its run loops internally
  let loop: CFRunLoop
}

private final class PerformBox {
  let body: () -> Void
  init(_ body: @escaping () -> Void) { self.body = body }
}

/// A version-0 CFRunLoopSource whose perform callback logs "perform NAME", then calls `then`.
private func cfSource(
  _ recorder: Recorder, _ name: String, order: Int = 0, then: @escaping () -> Void = {}
) -> CFRunLoopSource {
  var context = CFRunLoopSourceContext()
  context.info = Unmanaged.passRetained(
    PerformBox {
      recorder.log("perform \(name)")
      then()
    }
  ).toOpaque()
  context.perform = { info in Unmanaged<PerformBox>.fromOpaque(info!).takeUnretainedValue().body() }
  context.release = { info in Unmanaged<PerformBox>.fromOpaque(info!).release() }
  return CFRunLoopSourceCreate(nil, order, &context)
}

private func cfResult(_ result: CFRunLoopRunResult) -> Loop.RunResult {
  Loop.RunResult(rawValue: Int(result.rawValue))!
}

extension CFRunLoopMode {
  fileprivate static var defaultMode: CFRunLoopMode { kCFRunLoopDefaultMode }
}
