import CRunLoopShims
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  /// Checklist line 88: the Chrome trace of virtual time. Events there share instants, and
  /// loops share their maker's thread id; the export must still draw each where it belongs.
  @Suite("Chrome trace export in virtual time") struct ChromeTraceVirtualTime {
    @Test(
      "88. A nested run that moves the virtual clock, in a block or an observer, is drawn whole inside that callout, with its result and its passes"
    )
    func test_88_nestedRunThatMovesTheClockStaysInItsCallout() throws {
      let (inner, observed) = (Loop.Mode("inner"), Loop.Mode("observed"))
      let virtual = VirtualLoop()
      let tracer = LoopTracer()
      try tracer.attach(to: virtual.loop)
      // Keeps each mode's run going to its deadline once its timer has fired.
      let keepAlive = ManualSource {}
      for mode in [.default, inner, observed] { try virtual.loop.add(keepAlive, to: mode) }
      try virtual.loop.perform {
        try? Loop.current.add(
          LoopTimer(label: "inner tick", after: .milliseconds(10)) { _ in }, to: inner)
        Loop.current.run(in: inner, for: .milliseconds(50))
      }
      let observer = LoopObserver(activities: .beforeWaiting, repeats: false) { _, _ in
        try? Loop.current.add(
          LoopTimer(label: "observed tick", after: .milliseconds(5)) { _ in }, to: observed)
        Loop.current.run(in: observed, for: .milliseconds(20))
      }
      try virtual.loop.add(observer, to: .default)
      virtual.advance(by: .milliseconds(200))
      tracer.detach()
      keepAlive.invalidate()

      let trace = try ParsedChromeTrace(tracer.chromeTraceJSON())
      #expect(trace.problems.isEmpty, "\(trace.problems)")
      let track = try #require(trace.threadNames.first { $0.value == "VirtualLoop" }?.key)
      // Every return closed its run: no stray `returned` instant, no pass outside a run.
      #expect(trace.instants(on: track, category: "run").isEmpty)
      for pass in trace.slices(on: track, category: "pass") {
        let run = trace.parent(of: pass)
        #expect(trace.string(run?["cat"]) == "run")
        #expect(trace.int(run?["args"], "depth") == trace.int(pass["args"], "depth"))
      }
      let runs = trace.slices(on: track, category: "run")
      for (name, callout, tick, lasting) in [
        ("run(in: inner)", "blocks", "inner tick", 50),
        ("run(in: observed)", "observer", "observed tick", 20),
      ] {
        let run = try #require(runs.first { trace.string($0["name"]) == name })
        #expect(trace.arg(run, "result") == "timedOut", "\(name)")
        #expect(trace.string(trace.parent(of: run)?["cat"]) == callout, "\(name)")
        let slice = try #require(trace.parent(of: run))
        // As long as the run, less the few nanoseconds the spread moved its start.
        #expect((trace.number(slice["dur"]) ?? 0) > Double(lasting) * 1_000 - 0.1)
        #expect((trace.number(run["dur"]) ?? 0) > Double(lasting) * 1_000 - 0.1)
        let timer = try #require(
          trace.slices(on: track, category: "timer").first {
            trace.string($0["name"]) == tick
          })
        #expect(
          trace.ancestors(of: timer).prefix(3).map { trace.string($0["name"]) }
            == ["pass", name, trace.string(slice["name"])])
      }
    }

    @Test(
      "88. Two VirtualLoops traced on one thread are two tracks that do not overlap, in a process of virtual time apart from the real one"
    )
    func test_88_twoVirtualLoopsOnOneThreadAreTwoTracks() throws {
      func scenario(_ label: String) throws -> LoopTracer {
        let virtual = VirtualLoop()
        let tracer = LoopTracer()
        try tracer.attach(to: virtual.loop)
        let timer = try LoopTimer(
          label: label, after: .milliseconds(10), repeating: .milliseconds(10)
        ) {
          _ in
        }
        try virtual.loop.add(timer, to: .default)
        virtual.advance(by: .milliseconds(35))
        tracer.detach()
        timer.invalidate()
        return tracer
      }
      let tracers = [try scenario("first"), try scenario("second")]
      #expect(Set(tracers.flatMap(\.events).map(\.threadID)) == [crl_gettid()])
      let trace = try ParsedChromeTrace(LoopTracer.chromeTraceJSON(of: tracers))
      #expect(trace.problems.isEmpty, "\(trace.problems)")
      let names = trace.threadNames
      let first = try #require(names.first { $0.value == "VirtualLoop" }?.key)
      let second = try #require(names.first { $0.value == "VirtualLoop (loop 2)" }?.key)
      #expect(names.count == 2 && first != second)
      #expect(trace.names(on: first, category: "timer") == ["first", "first", "first"])
      #expect(trace.names(on: second, category: "timer") == ["second", "second", "second"])
      // Neither the real process nor the real thread appears.
      let virtualPID = Int(ChromeTraceDocument.virtualPID)
      #expect(trace.events.allSatisfy { trace.int($0["pid"]) == virtualPID })
      #expect(!trace.events.contains { trace.int($0["tid"]) == Int(crl_gettid()) })
      let process = trace.events.first { trace.string($0["name"]) == "process_name" }
      #expect(process.map { trace.arg($0, "name") } == "RunLoopKit (virtual time)")
    }

    @Test(
      "88. A thread's real loop and a VirtualLoop it made, traced by one tracer moved from one to the other, are two tracks in two processes, each on its own time line"
    )
    func test_88_realAndVirtualLoopOfOneThreadAreApart() throws {
      let tracer = LoopTracer()
      let threadID = try onLoopThread { loop -> pid_t in
        try tracer.attach(to: loop)
        try loop.add(LoopTimer(label: "real tick", after: .milliseconds(2)) { _ in }, to: .default)
        loop.run(for: .milliseconds(5))
        tracer.detach()
        let virtual = VirtualLoop()
        try tracer.attach(to: virtual.loop)
        try virtual.loop.add(
          LoopTimer(label: "virtual tick", after: .seconds(1)) { _ in }, to: .default)
        virtual.advance(by: .seconds(2))
        tracer.detach()
        return loop.threadID
      }
      #expect(Set(tracer.events.map(\.threadID)) == [threadID])
      let trace = try ParsedChromeTrace(tracer.chromeTraceJSON())
      #expect(trace.problems.isEmpty, "\(trace.problems)")
      let real = Int(threadID)
      let virtual = try #require(trace.threadNames.first { $0.value == "VirtualLoop" }?.key)
      #expect(virtual != real && trace.threadNames[real] != nil)
      #expect(trace.names(on: real, category: "timer") == ["real tick"])
      #expect(trace.names(on: virtual, category: "timer") == ["virtual tick"])
      #expect(trace.slices(on: real).allSatisfy { trace.int($0["pid"]) == Int(getpid()) })
      #expect(
        trace.slices(on: virtual).allSatisfy {
          trace.int($0["pid"]) == Int(ChromeTraceDocument.virtualPID)
        })
      // The real track counts from its own first event, not from virtual time's zero.
      let realRun = try #require(trace.slices(on: real, category: "run").first)
      #expect((trace.number(realRun["ts"]) ?? -1) == 0)
      let virtualTimer = try #require(trace.slices(on: virtual, category: "timer").first)
      #expect(Int((trace.number(virtualTimer["ts"]) ?? 0) / 1_000_000) == 1, "at 1 s")
      let clock = trace.string((trace.top["otherData"] as? [String: Any])?["clock"])
      #expect(clock.contains("CLOCK_MONOTONIC") && clock.contains("virtual"))
    }

    @Test(
      "88. A virtual trace is the same bytes whichever thread made it, and holds no real pid or tid"
    )
    func test_88_virtualTraceIndependentOfRealIDs() throws {
      @Sendable func traced() throws -> (json: String, thread: pid_t) {
        let virtual = VirtualLoop()
        let tracer = LoopTracer()
        try tracer.attach(to: virtual.loop)
        try virtual.loop.add(
          LoopTimer(label: "tick", after: .milliseconds(10), repeating: .milliseconds(10)) { _ in },
          to: .default)
        try virtual.loop.perform { Loop.current.run(in: Loop.Mode("inner"), for: .zero) }
        virtual.advance(by: .milliseconds(25))
        tracer.detach()
        return (tracer.chromeTraceJSON(), crl_gettid())
      }
      let one = try onLoopThread { _ in try traced() }
      let other = try onLoopThread { _ in try traced() }
      let here = try traced()
      #expect(Set([one.thread, other.thread, here.thread]).count == 3)
      #expect(one.json == other.json && other.json == here.json)
      for id in [getpid(), one.thread, other.thread, here.thread] {
        #expect(!here.json.contains("\"pid\":\(id),") && !here.json.contains("\"tid\":\(id),"))
      }
    }

    @Test(
      "88. A ring that dropped its oldest events starts anywhere, mid-pass or mid-nested-run, and still nests as Perfetto draws it"
    )
    func test_88_ringOverflowStillNests() throws {
      var firstKinds: Set<String> = []
      var total = Int.max
      for capacity in 3...200 where capacity < total {
        let virtual = VirtualLoop()
        let tracer = LoopTracer(capacity: capacity)
        try tracer.attach(to: virtual.loop)
        let timer = try LoopTimer(
          label: "tick", after: .milliseconds(10), repeating: .milliseconds(10)
        ) {
          _ in
          try? Loop.current.perform(in: Loop.Mode("inner")) {}
          Loop.current.run(in: Loop.Mode("inner"), for: .milliseconds(1))
        }
        try virtual.loop.add(timer, to: .default)
        virtual.advance(by: .milliseconds(45))
        tracer.detach()
        timer.invalidate()
        total = tracer.recordedCount  // the same every time: virtual time
        #expect(tracer.dropped > 0, "capacity \(capacity)")
        if let first = tracer.events.first { firstKinds.insert("\(first.depth) \(first.kind)") }
        let trace = try ParsedChromeTrace(tracer.chromeTraceJSON())
        #expect(trace.problems.isEmpty, "capacity \(capacity): \(trace.problems)")
        let other = trace.top["otherData"] as? [String: Any]
        #expect(trace.int(other?["dropped"]) == tracer.dropped)
      }
      // Cut at many places: inside nested runs (depth 2) and at callouts, not only at a pass.
      #expect(firstKinds.contains { $0.hasPrefix("2 ") })
      #expect(firstKinds.contains { $0.hasPrefix("1 ") && !$0.contains("beforeTimers") })
    }

    @Test("88. A hand-made snapshot with extreme times is exported without trapping")
    func test_88_extremeTimesDoNotTrap() throws {
      let virtual = VirtualLoop()
      let tracer = LoopTracer()
      try tracer.attach(to: virtual.loop)
      try virtual.loop.add(
        LoopTimer(label: "tick", after: .milliseconds(10)) { _ in }, to: .default)
      virtual.advance(by: .milliseconds(20))
      tracer.detach()
      let events = tracer.events
      #expect(events.count > 4)
      var extreme = events
      extreme[0].start = .seconds(Int64.max)
      extreme[1].start = .seconds(Int64.min)
      extreme[2].duration = .seconds(Int64.max)
      extreme[3].start = .nanoseconds(Int64.max - 1)
      var real = extreme
      for index in real.indices { real[index].clockID = 0 }  // the real time line's path
      for origin in [Int64.max, Int64.min, 0] {
        for list in [extreme, real] {
          let snapshot = LoopTracer.Snapshot(
            origin: LoopClock.Instant(nanoseconds: origin), events: list)
          let trace = try ParsedChromeTrace(LoopTracer.chromeTraceJSON(snapshots: [snapshot]))
          #expect(trace.events.allSatisfy { trace.number($0["ts"]) != nil })
        }
      }
      #expect(try ParsedChromeTrace(LoopTracer.chromeTraceJSON(of: [])).problems.isEmpty)
    }
  }
}
