import CRunLoopShims
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  /// Checklist line 88: what other threads send a traced loop — signals and wake-ups — is
  /// recorded on their tracks, stamped before it could have any effect, whichever path sent it.
  @Suite("Chrome trace: signals and wake-ups sent") struct ChromeTraceSent {
    @Test(
      "88. A signal and the wake-up after it are stamped before the sleep they end, which ends before the source is performed"
    )
    func test_88_sentInstantsPrecedeWhatTheyCause() throws {
      let performed = Recorder()
      let thread = LoopThread { loop in loop.run(for: .seconds(30)) }
      let loop = thread.loop
      let button = ManualSource(label: "button") { performed.log("button") }
      try loop.add(button, to: .default)
      let tracer = LoopTracer()
      try tracer.attach(to: loop)
      thread.start()
      for round in 1...3 {
        #expect(waitUntil { loop.isWaiting })
        button.signalAndWake()
        #expect(waitUntil { performed.count(of: "button") == round })
      }
      #expect(waitUntil { loop.isWaiting })
      try loop.perform { Loop.current.stop() }
      thread.join()
      tracer.detach()
      button.invalidate()

      let events = tracer.events
      let me = crl_gettid()
      let byStart = { (a: LoopTracer.Event, b: LoopTracer.Event) in a.start < b.start }
      let signals = events.filter { $0.kind == .signalSent("button") }.sorted(by: byStart)
      let wakeUps = events.filter { $0.threadID == me && $0.kind == .wakeUpSent(.futex) }
        .sorted(by: byStart)
      let performs = events.filter { $0.kind == .manualSource("button") }
      #expect(signals.count == 3 && performs.count == 3 && wakeUps.count == 4)
      #expect(signals.allSatisfy { $0.threadID == me })
      for round in 0..<min(3, signals.count, wakeUps.count, performs.count) {
        let (signal, wakeUp, perform) = (signals[round], wakeUps[round], performs[round])
        // The sleep the wake-up ended: the last one before the perform.
        let performed = try #require(events.firstIndex(of: perform))
        let sleep = try #require(
          events[..<performed].last { if case .slept = $0.kind { true } else { false } })
        #expect(sleep.kind == .slept(wokenBy: [.wakeUp]))
        #expect(signal.start <= wakeUp.start)
        #expect(wakeUp.start <= sleep.end)
        #expect(sleep.end <= perform.start)
      }
    }

    @Test(
      "88. Wake-ups sent while holding the loop's lock (a timer added to a loop asleep on its futex, a signalled source joining its mode) are recorded, with the sender's name"
    )
    func test_88_wakeUpsSentHoldingTheLockAreRecorded() throws {
      let ran = Recorder()
      let thread = LoopThread { loop in loop.run(for: .seconds(30)) }
      let loop = thread.loop
      let keepAlive = ManualSource {}
      try loop.add(keepAlive, to: .default)  // no descriptor: the loop sleeps on its futex
      let tracer = LoopTracer()
      try tracer.attach(to: loop)
      thread.start()
      #expect(waitUntil { loop.isWaiting })
      try loop.add(
        LoopTimer(label: "added", after: .milliseconds(1)) { _ in ran.log("timer") }, to: .default)
      #expect(waitUntil { ran.all == ["timer"] && loop.isWaiting })
      let late = ManualSource(label: "late") { ran.log("late") }
      late.signal()  // not yet on a loop: signalling it sends nothing
      try loop.add(late, to: .default)
      #expect(waitUntil { ran.all == ["timer", "late"] && loop.isWaiting })
      // Both sent holding the lock, so recorded through the tracer's inbox, sender named.
      let me = crl_gettid()
      let early = tracer.snapshot()
      #expect(
        early.events.filter { $0.threadID == me }.map(\.kind) == [
          .wakeUpSent(.futex), .wakeUpSent(.futex),
        ])
      #expect(early.threadNames[me] == currentThreadTrackName())
      try loop.perform { Loop.current.stop() }
      thread.join()
      tracer.detach()
      keepAlive.invalidate()
      late.invalidate()

      let snapshot = tracer.snapshot()
      let sent = snapshot.events.filter { $0.threadID == me }
      #expect(sent.map(\.kind) == Array(repeating: .wakeUpSent(.futex), count: 3))
      // Every sleep a wake-up ended has its sender's instant, stamped before the sleep ended.
      let woken = snapshot.events.filter {
        if case .slept(let causes) = $0.kind { causes.contains(.wakeUp) } else { false }
      }
      #expect(woken.count == 3)
      for (wakeUp, sleep) in zip(sent, woken) { #expect(wakeUp.start <= sleep.end) }
      let trace = try ParsedChromeTrace(tracer.chromeTraceJSON())
      #expect(trace.problems.isEmpty, "\(trace.problems)")
      #expect(trace.instants(on: Int(me), category: "wake-up").count == 3)
    }
  }
}
