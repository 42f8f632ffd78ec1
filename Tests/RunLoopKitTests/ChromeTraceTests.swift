import CRunLoopShims
import Foundation
import Glibc
import RunLoopDemos
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  /// Checklist line 88: the Chrome Trace Event export. No viewer runs here, so each test
  /// parses the file with JSONSerialization and checks what the format requires (fields,
  /// phases, durations, thread names, slices nesting on each track) and what the trace says.
  @Suite("Chrome trace export") struct ChromeTrace {
    @Test(
      "88. Runs, passes, waits, timers, sources, ports, descriptors, observers and blocks are slices on the loop thread's track; signals and wake-ups sent are instants on the sender's"
    )
    func test_88_everyKindIsASliceOnItsThreadsTrack() throws {
      let inner = Loop.Mode("inner")
      let recorder = Recorder()
      let thread = LoopThread { loop in recorder.log("returned .\(loop.run(for: .seconds(30)))") }
      let loop = thread.loop
      let tracer = LoopTracer()
      try tracer.attach(to: loop)
      let manual = ManualSource(label: "manual") { recorder.log("manual") }
      let port = try LoopPort<String>(label: "inbox") { recorder.log($0) }
      let observer = LoopObserver(activities: .beforeWaiting) { _, _ in }
      try loop.add(manual, to: .default)
      try loop.add(port, to: .default)
      try loop.add(observer, to: .default)
      let fd = try withPipe { pipe -> Int32 in
        let source = DescriptorSource(fileDescriptor: pipe.read, label: "pipe") { _, _ in
          drain(pipe.read)
          recorder.log("pipe")
        }
        try loop.add(source, to: .default)
        defer { source.invalidate() }
        thread.start()
        // Each step waits until the loop has handled it and sleeps again.
        #expect(waitUntil { loop.isWaiting })
        manual.signal()  // does not wake the loop; the wake-up does
        loop.wakeUp()
        #expect(waitUntil { recorder.all.contains("manual") && loop.isWaiting })
        try port.send("hello")
        #expect(waitUntil { recorder.all.contains("hello") && loop.isWaiting })
        writeByte(pipe.write)
        #expect(waitUntil { recorder.all.contains("pipe") && loop.isWaiting })
        try loop.perform {
          try? Loop.current.perform(in: inner) { recorder.log("inner block") }
          Loop.current.run(in: inner, for: .seconds(5))
        }
        #expect(waitUntil { recorder.all.contains("inner block") && loop.isWaiting })
        try loop.add(
          LoopTimer(label: "tick", after: .milliseconds(1)) { _ in recorder.log("tick") },
          to: .default)
        #expect(waitUntil { recorder.all.contains("tick") && loop.isWaiting })
        try loop.perform { Loop.current.stop() }
        thread.join()
        return pipe.read
      }
      tracer.detach()
      manual.invalidate()
      port.invalidate()
      observer.invalidate()
      #expect(recorder.all.last == "returned .stopped")

      let trace = try ParsedChromeTrace(tracer.chromeTraceJSON())
      #expect(trace.problems.isEmpty, "\(trace.problems)")
      let (loopTrack, sender) = (Int(loop.threadID), Int(crl_gettid()))
      #expect(trace.threadNames[loopTrack] == loop.threadName ?? "thread \(loop.threadID)")
      #expect(trace.threadNames[sender] == currentThreadTrackName())
      #expect(trace.events.allSatisfy { trace.int($0["pid"]) == Int(getpid()) })

      // The runs: the outer one stopped, the nested one inside the block that ran it.
      let runs = trace.slices(on: loopTrack, category: "run")
      #expect(runs.map { trace.string($0["name"]) } == ["run(in: default)", "run(in: inner)"])
      #expect(runs.map { trace.arg($0, "result") } == ["stopped", "finished"])
      let blocks = trace.slices(on: loopTrack, category: "blocks")
      #expect(blocks.count == 3, "the nested run's block, the inner block, the stop block")
      #expect(blocks.contains { trace.contains($0, runs[1]) })
      #expect(trace.string(trace.parent(of: runs[1])?["cat"]) == "blocks")
      // One pass slice per beforeTimers, each numbered within its run.
      let passes = trace.slices(on: loopTrack, category: "pass")
      #expect(passes.count == trace.instants(on: loopTrack, named: "beforeTimers").count)
      #expect(passes.count >= 5)
      #expect(passes.first.flatMap { trace.int($0["args"], "pass") } == 1)
      // Every sleep, with what ended it.
      let woken = trace.slices(on: loopTrack, category: "wait").map { trace.arg($0, "wokenBy") }
      for cause in ["wake-up", "port \"inbox\"", "\"pipe\" (fd \(fd))", "timer"] {
        #expect(woken.contains(cause), "\(woken)")
      }
      // The callouts, by what ran.
      let timer = try #require(trace.slices(on: loopTrack, category: "timer").first)
      #expect(trace.string(timer["name"]) == "tick")
      #expect((trace.number(timer["args"], "lateness_us") ?? -1) >= 0)
      #expect(trace.names(on: loopTrack, category: "source") == ["manual"])
      #expect(trace.names(on: loopTrack, category: "port") == ["inbox"])
      let pipe = try #require(trace.slices(on: loopTrack, category: "descriptor").first)
      #expect(trace.string(pipe["name"]) == "pipe")
      #expect(trace.int(pipe["args"], "fd") == Int(fd))
      #expect(trace.arg(pipe, "events").contains("readable"))
      // The observer is told of beforeWaiting only: one callout per such activity.
      let observed = trace.names(on: loopTrack, category: "observer")
      #expect(!observed.isEmpty)
      #expect(observed.allSatisfy { $0 == "observer: beforeWaiting" })
      #expect(observed.count == trace.instants(on: loopTrack, named: "beforeWaiting").count)

      // What this thread sent: one signal, and a wake-up for wakeUp() and each perform (each
      // made once the loop slept; the port, the pipe and the timer wake it through their own
      // descriptors). The signal is stamped before the loop performed the source.
      let signals = trace.instants(on: sender, category: "signal")
      #expect(signals.map { trace.arg($0, "source") } == ["manual"])
      let source = try #require(trace.slices(on: loopTrack, category: "source").first)
      #expect(signals.allSatisfy { trace.nanoseconds($0).start <= trace.nanoseconds(source).start })
      let wakeUps = trace.instants(on: sender, category: "wake-up")
      #expect(wakeUps.count == 3)
      #expect(wakeUps.allSatisfy { trace.arg($0, "via") == "eventfd write" })
      #expect(trace.instants(on: loopTrack, category: "signal").isEmpty)
    }

    @Test(
      "88. Passes and runs follow the activities; events at one virtual instant are spread 1 ns apart so each nests as Perfetto draws it, and the file is the same on every run"
    )
    func test_88_passesRunsAndZeroLengthNesting() throws {
      let inner = Loop.Mode("inner")
      func traced() throws -> (json: String, events: [LoopTracer.Event]) {
        let virtual = VirtualLoop()
        let tracer = LoopTracer()
        try tracer.attach(to: virtual.loop)
        try virtual.loop.add(
          LoopTimer(label: "tick", after: .milliseconds(100), repeating: .milliseconds(100)) {
            _ in
          }, to: .default)
        try virtual.loop.perform {
          try? Loop.current.perform(in: inner) {}
          Loop.current.run(in: inner, for: .zero)
        }
        virtual.advance(by: .milliseconds(350))
        tracer.detach()
        return (tracer.chromeTraceJSON(), tracer.events)
      }
      let (json, events) = try traced()
      #expect(try traced().json == json, "virtual time: byte-identical files")

      let trace = try ParsedChromeTrace(json)
      #expect(trace.problems.isEmpty, "\(trace.problems)")
      let track = try #require(trace.threadNames.first { $0.value == "VirtualLoop" }?.key)
      let count = { (kind: (LoopTracer.Kind) -> Bool) in events.filter { kind($0.kind) }.count }
      #expect(
        trace.slices(on: track, category: "pass").count
          == count { $0 == .activity(.beforeTimers) })
      #expect(
        trace.slices(on: track, category: "run").count == count { $0 == .activity(.entry) })
      #expect(
        trace.slices(on: track, category: "wait").count
          == count { if case .slept = $0 { true } else { false } })
      let timers = trace.slices(on: track, category: "timer")
      #expect(timers.count == 3, "at 100, 200 and 300 ms")
      // Nothing lasts no time (a viewer would nest nothing in it), yet nothing moved far.
      #expect(trace.slices(on: track).allSatisfy { (trace.number($0["dur"]) ?? 0) > 0 })
      #expect(timers.map { Int((trace.number($0["ts"]) ?? 0) / 1_000) } == [100, 200, 300])
      // The block and the run nested in it happen at one instant and last no time: the run
      // is drawn inside the block, its pass inside it, the inner block inside that pass.
      let block = try #require(
        trace.slices(on: track, category: "blocks").first { trace.int($0["args"], "depth") == 1 })
      let nested = try #require(
        trace.slices(on: track, category: "run").first {
          trace.string($0["name"]) == "run(in: inner)"
        })
      #expect(
        trace.parent(of: nested).map { trace.nanoseconds($0).start }
          == trace.nanoseconds(block).start)
      #expect(trace.string(trace.parent(of: nested)?["cat"]) == "blocks")
      let innerBlock = try #require(
        trace.slices(on: track, category: "blocks").first { trace.arg($0, "mode") == "inner" })
      #expect(
        trace.ancestors(of: innerBlock).prefix(3).map { trace.string($0["cat"]) }
          == ["pass", "run", "blocks"])
      // A timer fired after a sleep is drawn in the pass that slept, not in the next one,
      // which begins at the same virtual instant.
      for timer in timers {
        let pass = try #require(trace.parent(of: timer))
        #expect(trace.string(pass["cat"]) == "pass")
        let sleep = trace.slices(on: track, category: "wait").last {
          trace.nanoseconds($0).start < trace.nanoseconds(timer).start
        }
        let sleptIn = sleep.flatMap { trace.parent(of: $0) }
        #expect(sleptIn.map { trace.nanoseconds($0).start } == trace.nanoseconds(pass).start)
      }
    }

    @Test("88. Two loops on two threads: two named tracks on one time line")
    func test_88_twoLoopsTwoTracks() throws {
      let alpha = try ResidentThread(name: "alpha")
      let beta = try ResidentThread(name: "beta")
      defer {
        alpha.stop()
        beta.stop()
        try? alpha.join()
        try? beta.join()
      }
      let ran = Recorder()
      let alphaTracer = LoopTracer()
      try alphaTracer.attach(to: alpha.loop)
      #expect(waitUntil { alpha.loop.isWaiting })
      try alpha.perform { ran.log("alpha") }
      #expect(waitUntil { ran.all == ["alpha"] && alpha.loop.isWaiting })
      // Made later, so its origin differs: the export must still put beta's block after.
      let betaTracer = LoopTracer()
      try betaTracer.attach(to: beta.loop)
      #expect(waitUntil { beta.loop.isWaiting })
      try beta.perform { ran.log("beta") }
      #expect(waitUntil { ran.all == ["alpha", "beta"] && beta.loop.isWaiting })
      alphaTracer.detach()
      betaTracer.detach()

      let trace = try ParsedChromeTrace(LoopTracer.chromeTraceJSON(of: [alphaTracer, betaTracer]))
      #expect(trace.problems.isEmpty, "\(trace.problems)")
      let snapshots = try ParsedChromeTrace(
        LoopTracer.chromeTraceJSON(snapshots: [alphaTracer.snapshot(), betaTracer.snapshot()]))
      #expect(snapshots.events.count == trace.events.count)
      let (a, b) = (Int(alpha.threadID), Int(beta.threadID))
      #expect(a != b)
      #expect(trace.threadNames[a] == "alpha")
      #expect(trace.threadNames[b] == "beta")
      let alphaBlock = try #require(trace.slices(on: a, category: "blocks").first)
      let betaBlock = try #require(trace.slices(on: b, category: "blocks").first)
      #expect(trace.number(alphaBlock["ts"])! < trace.number(betaBlock["ts"])!)
      // The wake-ups this thread sent, each naming the loop it woke.
      let sent = trace.instants(on: Int(crl_gettid()), category: "wake-up")
      #expect(sent.map { trace.arg($0, "loop") } == ["alpha", "beta"])
      #expect(trace.threadNames[Int(crl_gettid())] == currentThreadTrackName())
    }

    @Test("88. Labels with quotes, backslashes and control characters survive as JSON strings")
    func test_88_labelsAreEscaped() throws {
      let label = "say \"hi\" \\ back\nslash\ttab \u{07} bell é ✓"
      let mode = Loop.Mode("mode \"q\"")
      let tracer = try onLoopThread { loop -> LoopTracer in
        let source = ManualSource(label: label) {}
        try loop.add(source, to: mode)
        let tracer = LoopTracer()
        try tracer.attach(to: loop)
        source.signal()
        loop.run(in: mode, for: .zero)
        tracer.detach()
        source.invalidate()
        return tracer
      }
      let json = tracer.chromeTraceJSON(processName: "a \"process\"\n")
      #expect(json.contains("\\u0007"))
      let trace = try ParsedChromeTrace(json)
      #expect(trace.problems.isEmpty, "\(trace.problems)")
      let source = try #require(trace.events.first { trace.string($0["cat"]) == "source" })
      #expect(trace.string(source["name"]) == label)
      #expect(trace.arg(source, "mode") == mode.name)
      let process = try #require(trace.events.first { trace.string($0["name"]) == "process_name" })
      #expect(trace.arg(process, "name") == "a \"process\"\n")
    }

    @Test("88. A run seen only in part (attached asleep, detached in a callout) still nests")
    func test_88_partialRunStillNests() throws {
      let inner = Loop.Mode("inner")
      let thread = LoopThread { loop in loop.run(for: .seconds(30)) }
      let loop = thread.loop
      try loop.add(ManualSource {}, to: .default)
      thread.start()
      #expect(waitUntil { loop.isWaiting })
      let tracer = LoopTracer()
      try tracer.attach(to: loop)
      // A first block ends the pass the attach cut into; the next pass is seen from its start.
      let ran = Gate()
      try loop.perform { ran.open() }
      #expect(ran.wait())
      #expect(waitUntil { loop.isWaiting })
      let detached = Gate()
      try loop.perform {
        try? Loop.current.perform(in: inner) {}
        Loop.current.run(in: inner, for: .seconds(5))
        tracer.detach()  // this block, and the outer run's end, go unrecorded
        detached.open()
      }
      #expect(detached.wait())
      try loop.perform { Loop.current.stop() }
      thread.join()

      let trace = try ParsedChromeTrace(tracer.chromeTraceJSON())
      #expect(trace.problems.isEmpty, "\(trace.problems)")
      let track = Int(loop.threadID)
      let slices = trace.slices(on: track)
      // The sleep the attach cut into comes first, outside any pass; then the first block, and
      // one whole pass, cut short where its last recorded event ended, around the nested run
      // (the block that ran it was still running at the detach). The outer run was never
      // seen to begin or end.
      #expect(slices.prefix(2).map { trace.string($0["cat"]) } == ["wait", "blocks"])
      let runs = trace.slices(on: track, category: "run")
      #expect(runs.map { trace.string($0["name"]) } == ["run(in: inner)"])
      let passes = trace.slices(on: track, category: "pass")
      let outer = passes.filter { trace.int($0["args"], "depth") == 1 }
      #expect(outer.count == 1)
      #expect(outer.first.map { trace.contains($0, runs[0]) } == true)
    }

    @Test("88. The modes demo's trace has wait and timer slices on the ui thread's track")
    func test_88_modesDemoTrace() throws {
      let report = try ModesDemo.run()
      let trace = try ParsedChromeTrace(report.chromeTraceJSON())
      #expect(trace.problems.isEmpty, "\(trace.problems)")
      let ui = try #require(trace.threadNames.first { $0.value == "ui" }?.key)
      let waits = trace.slices(on: ui, category: "wait")
      let timers = trace.slices(on: ui, category: "timer")
      #expect(waits.count >= 3, "each 110 ms run sleeps")
      #expect(Set(timers.map { trace.string($0["name"]) }) == ["clock", "touch"])
      for slice in waits + timers {
        #expect(trace.string(slice["ph"]) == "X")
        #expect(trace.number(slice["ts"]) != nil && trace.number(slice["dur"]) != nil)
        #expect(trace.int(slice["pid"]) == Int(getpid()) && trace.int(slice["tid"]) == ui)
      }
      // Three traced runs, one per step, on one track and in order.
      let runs = trace.slices(on: ui, category: "run")
      #expect(runs.map { trace.arg($0, "mode") } == ["default", "tracking", "tracking"])
      #expect(trace.string(trace.top["displayTimeUnit"]) == "ms")
    }

    @Test(
      "88. The checks above catch overlapping slices, unnamed threads, missing fields and unnamed name records, and nest slices as Perfetto does"
    )
    func test_88_theChecksCatchBrokenTraces() throws {
      let broken = """
        {"traceEvents":[
        {"name":"thread_name","ph":"M","ts":0,"pid":1,"tid":2,"args":{"name":"loop"}},
        {"name":"a","cat":"c","ph":"X","ts":1.000,"dur":5.000,"pid":1,"tid":2},
        {"name":"b","cat":"c","ph":"X","ts":3.000,"dur":5.000,"pid":1,"tid":2},
        {"name":"c","cat":"c","ph":"X","ts":1.000,"dur":1.000,"pid":1,"tid":3},
        {"name":"d","ph":"i","ts":1.000,"pid":1,"tid":2},
        {"name":"e","ph":"X","pid":1,"tid":2},
        {"name":"thread_name","ph":"M","ts":0,"pid":1,"tid":4},
        {"name":"f","cat":"c","ph":"X","ts":20.000,"dur":0.000,"pid":1,"tid":2},
        {"name":"g","cat":"c","ph":"X","ts":20.000,"dur":0.000,"pid":1,"tid":2},
        {"name":"h","cat":"c","ph":"X","ts":30.000,"dur":2.000,"pid":1,"tid":2},
        {"name":"k","cat":"c","ph":"X","ts":32.000,"dur":1.000,"pid":1,"tid":2},
        {"name":"m","cat":"c","ph":"X","ts":30.000,"dur":2.000,"pid":1,"tid":2}
        ]}
        """
      let trace = try ParsedChromeTrace(broken)
      let problems = trace.problems
      #expect(problems.contains { $0.hasPrefix("b ") && $0.contains("overlaps a") })
      #expect(problems.contains("tid 3 has no name"))
      #expect(problems.contains("instant not thread-scoped: d"))
      #expect(problems.contains { $0.hasPrefix("missing name, ts, pid or tid") })
      #expect(problems.contains("thread_name without args.name: tid 4"))
      #expect(problems.count == 5, "\(problems)")
      // Perfetto's rule: a slice lasting no time holds nothing, not even one just like it; a
      // slice starting where another ends follows it; one with the same span nests.
      let named = { (name: String) in trace.events.first { trace.string($0["name"]) == name }! }
      #expect(trace.parent(of: named("g")) == nil)
      #expect(trace.parent(of: named("k")) == nil)
      #expect(trace.string(trace.parent(of: named("m"))?["name"]) == "h")
    }

    @Test("88. Times are written as exact microseconds; strings escape what JSON requires")
    func test_88_numbersAndStrings() {
      #expect(JSONText.microseconds(0) == "0.000")
      #expect(JSONText.microseconds(1) == "0.001")
      #expect(JSONText.microseconds(999) == "0.999")
      #expect(JSONText.microseconds(1_000) == "1.000")
      #expect(JSONText.microseconds(1_234_567_890) == "1234567.890")
      #expect(JSONText.microseconds(-1_500) == "-1.500")
      #expect(JSONText.quoted("a\"b\\c\nd\u{01}\u{2028}") == "\"a\\\"b\\\\c\\nd\\u0001\\u2028\"")
    }
  }
}

/// The name the export gives the calling thread's track when it sends to a loop.
func currentThreadTrackName() -> String {
  let tid = crl_gettid()
  return tid == getpid() ? "main" : ThreadName.of(pthread_self()) ?? "thread \(tid)"
}
