import Foundation
import FoundationXML
import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Tracer") struct Tracer {
    typealias Kind = LoopTracer.Kind

    @Test("A traced run records every phase in order: blocks, sources, sleeps with their cause")
    func tracedRunInOrder() throws {
      let (events, fd) = try onLoopThread { loop -> ([LoopTracer.Event], Int32) in
        try withStoppingPipe(on: loop) { pipe, _ in
          let manual = ManualSource(label: "manual") {}
          try loop.add(manual, to: .default)
          defer { manual.invalidate() }
          try loop.add(
            // Far enough away that the first pass (which only polls) cannot see it due.
            LoopTimer(label: "tick", after: .milliseconds(250)) { _ in writeByte(pipe.write) },
            to: .default)
          let tracer = LoopTracer()
          try tracer.attach(to: loop)
          try loop.perform {}
          manual.signal()
          #expect(loop.run(for: .seconds(10)) == .stopped)
          tracer.detach()
          return (tracer.events, pipe.read)
        }
      }
      let expected: [Kind] = [
        .activity(.entry),
        .activity(.beforeTimers), .activity(.beforeSources), .blocks(count: 1),
        .manualSource("manual"),
        .activity(.beforeTimers), .activity(.beforeSources), .activity(.beforeWaiting),
        .slept(wokenBy: [.timer]), .activity(.afterWaiting), .timer("tick", lateness: .zero),
        .activity(.beforeTimers), .activity(.beforeSources), .activity(.beforeWaiting),
        .slept(wokenBy: [.descriptor("pipe", fd: fd)]), .activity(.afterWaiting),
        .descriptor("pipe", fd: fd, events: .readable),
        .activity(.exit), .returned(.stopped),
      ]
      #expect(events.map { $0.kind.withoutLateness } == expected)
      #expect(events.allSatisfy { $0.depth == 1 && $0.mode == .default })
      #expect(zip(events, events.dropFirst()).allSatisfy { $0.start <= $1.start })
      for event in events {
        if case .timer(_, let lateness) = event.kind { #expect(lateness >= .zero) }
        if case .slept = event.kind { #expect(event.duration > .zero) }
      }
    }

    @Test("Nested runs are recorded one level deeper; a run of an empty mode only returns")
    func nestedRunsAndEmptyModes() throws {
      let inner = Loop.Mode("inner")
      let events = try onLoopThread { loop -> [LoopTracer.Event] in
        let tracer = LoopTracer()
        try tracer.attach(to: loop)
        try loop.perform {
          Loop.current.run(in: "nothing here", for: .seconds(5))
          try? Loop.current.perform(in: inner) {}
          Loop.current.run(in: inner, for: .seconds(5))
        }
        #expect(loop.run(for: .seconds(5)) == .finished)
        tracer.detach()
        return tracer.events
      }
      let shape = events.map { "\($0.depth) \($0.mode) \($0.kind.withoutLateness)" }
      #expect(
        shape == [
          "1 default activity(entry)",
          "1 default activity(beforeTimers)",
          "1 default activity(beforeSources)",
          "2 nothing here returned(finished)",
          "2 inner activity(entry)",
          "2 inner activity(beforeTimers)",
          "2 inner activity(beforeSources)",
          "2 inner blocks(count: 1)",
          "2 inner activity(exit)",
          "2 inner returned(finished)",
          "1 default blocks(count: 1)",
          "1 default activity(exit)",
          "1 default returned(finished)",
        ])
      // The outer block's duration covers the whole nested run.
      let outerBlock = try #require(events.first { $0.depth == 1 && $0.kind == .blocks(count: 1) })
      let innerExit = try #require(events.first { $0.depth == 2 && $0.kind == .activity(.exit) })
      #expect(outerBlock.start <= innerExit.start && innerExit.start <= outerBlock.end)
      // Recorded when it returned, but shown where it began: before the nested run's lines.
      let lines = LoopTracer.timeline(of: events).split(separator: "\n")
      let blockLine = try #require(
        lines.firstIndex { $0.contains(" default ") && $0.contains("ran 1 block") })
      let nestedEntry = try #require(
        lines.firstIndex { $0.contains("inner") && $0.contains("entry") })
      #expect(blockLine < nestedEntry)
    }

    @Test("Attaching while the loop sleeps records that sleep from the attach, never before")
    func attachWhileAsleep() throws {
      // Plain sleeping, and spinning first: the spin ended before the attach, so it is not
      // recorded at all, and nothing gets a negative duration.
      for policy in [Loop.WaitPolicy.sleep, .spinThenSleep(.milliseconds(5))] {
        let thread = LoopThread { loop in loop.run(for: .seconds(30)) }
        let loop = thread.loop
        loop.waitPolicy = policy
        try loop.add(ManualSource {}, to: .default)
        thread.start()
        #expect(waitUntil { loop.isWaiting })
        usleep(20_000)
        let tracer = LoopTracer()
        let beforeAttach = tracer.origin.duration(to: .now)
        try tracer.attach(to: loop)
        try loop.perform { Loop.current.stop() }
        thread.join()
        tracer.detach()
        let events = tracer.events
        #expect(events.allSatisfy { $0.start >= beforeAttach && $0.duration >= .zero })
        // The loop's first event; the wake-up this thread sent is recorded on its own thread.
        let loopEvents = events.filter { $0.threadID == loop.threadID }
        #expect(loopEvents.first?.kind == .slept(wokenBy: [.wakeUp]), "\(policy)")
        #expect(events.filter { $0.threadID != loop.threadID }.map(\.kind) == [.wakeUpSent(.futex)])
        #expect(!events.contains { if case .spun = $0.kind { true } else { false } })
      }
    }

    @Test("A callout that outlives a detach is not recorded, not even into the next loop's trace")
    func detachDuringCallout() throws {
      let idle = LoopThread { loop in loop.run(for: .seconds(30)) }
      try idle.loop.add(ManualSource {}, to: .default)
      idle.start()
      #expect(waitUntil { idle.loop.isWaiting })
      let tracer = LoopTracer()
      let attachedElsewhere = Box(false)
      let kinds = try onLoopThread { loop -> [Kind] in
        try tracer.attach(to: loop)
        let source = ManualSource(label: "moves the tracer") {
          tracer.detach()
          attachedElsewhere.value = (try? tracer.attach(to: idle.loop)) != nil
          tracer.clear()
        }
        try loop.add(source, to: .default)
        source.signal()
        loop.run(for: .zero)
        source.invalidate()
        return tracer.events.map(\.kind)
      }
      // The idle loop is still asleep: nothing at all, and nothing from the first loop.
      #expect(attachedElsewhere.value)
      #expect(kinds.isEmpty)
      tracer.detach()
      try idle.loop.perform { Loop.current.stop() }
      idle.join()
    }

    @Test("Attach and detach racing from two threads never leave a tracer stuck on a loop")
    func attachDetachRace() throws {
      let thread = LoopThread { loop in loop.run(for: .seconds(60)) }
      let loop = thread.loop
      try loop.add(ManualSource {}, to: .default)
      thread.start()
      let tracer = LoopTracer()
      let done = Box(false)
      let detacherStarted = Gate()
      let detacher = TestThread {
        detacherStarted.open()
        while !done.value { tracer.detach() }
      }
      #expect(detacherStarted.wait())
      // Every attach must succeed: detached, the loop takes the tracer again; attached, to
      // the same loop, attaching is harmless. A refusal means a half-done attach or detach.
      var refused: [String] = []
      for _ in 0..<20_000 {
        do throws(LoopError) { try tracer.attach(to: loop) } catch { refused.append("\(error)") }
      }
      done.value = true
      detacher.join()
      #expect(refused.isEmpty, "\(refused.count) attaches refused, first: \(refused.first ?? "")")
      tracer.detach()

      // Fully detached: it records nothing more, even while the loop keeps working.
      tracer.clear()
      let ran = Gate()
      try loop.perform { ran.open() }
      #expect(ran.wait())
      #expect(tracer.events.isEmpty)
      // The loop is free for another tracer, which sees the loop's work…
      let other = LoopTracer()
      try other.attach(to: loop)
      let ranTraced = Gate()
      try loop.perform { ranTraced.open() }
      #expect(ranTraced.wait())
      #expect(waitUntil { other.events.contains { $0.kind == .blocks(count: 1) } })
      other.detach()
      #expect(tracer.events.isEmpty)
      // …and the first tracer is free to follow another loop, and records there.
      let elsewhere = try onLoopThread { elsewhere -> [Kind] in
        try tracer.attach(to: elsewhere)
        try elsewhere.perform {}
        elsewhere.run(for: .zero)
        tracer.detach()
        return tracer.events.map(\.kind)
      }
      #expect(elsewhere.contains(.blocks(count: 1)))
      try loop.perform { Loop.current.stop() }
      thread.join()
    }

    @Test("Spinning wait policies record the spin and what it found; no empty block batches")
    func spinsAndEmptyBatches() throws {
      let events = try onLoopThread { loop -> [LoopTracer.Event] in
        try withStoppingPipe(on: loop) { pipe, _ in
          // A block for a mode that never runs stays queued: no "ran 0 blocks" for it.
          try loop.perform(in: "elsewhere") {}
          let tracer = LoopTracer()
          try tracer.attach(to: loop)
          loop.waitPolicy = .spinThenSleep(.seconds(10))
          // Written once the loop has begun its spin, so the spin is what finds it.
          let writer = TestThread {
            _ = waitUntil { tracer.events.contains { $0.kind == .activity(.beforeWaiting) } }
            usleep(2_000)
            writeByte(pipe.write)
          }
          #expect(loop.run(for: .seconds(30)) == .stopped)
          writer.join()
          // A short window with a deadline: the spin runs out, then the loop sleeps.
          loop.waitPolicy = .spinThenSleep(.microseconds(100))
          #expect(loop.run(for: .milliseconds(200)) == .timedOut)
          // Busy-waiting into the deadline: no sleep at all.
          loop.waitPolicy = .busyWait
          #expect(loop.run(for: .milliseconds(100)) == .timedOut)
          tracer.detach()
          return tracer.events
        }
      }
      let waits = events.filter { $0.lane == .waiting && !isActivity($0.kind) }.map(\.kind)
      #expect(
        waits == [
          .spun(wokenBy: [pipeCause(events)]),
          .spun(wokenBy: []), .slept(wokenBy: [.deadline]),
          .spun(wokenBy: []),
        ])
      #expect(!events.contains { $0.kind == .blocks(count: 0) })
      let spin = try #require(events.first { if case .spun = $0.kind { true } else { false } })
      #expect(spin.duration > .zero)
    }

    @Test("Control characters in labels cannot break the SVG")
    func controlCharactersInLabels() throws {
      let tracer = try onLoopThread { loop -> LoopTracer in
        let source = ManualSource(label: "bell\u{07} & <tag>") {}
        try loop.add(source, to: .default)
        let tracer = LoopTracer()
        try tracer.attach(to: loop)
        source.signal()
        loop.run(for: .zero)
        source.invalidate()
        return tracer
      }
      #expect(tracer.events.contains { $0.kind == .manualSource("bell\u{07} & <tag>") })
      let parsed = SVGSummary(tracer.svg())
      #expect(parsed.error == nil)
      #expect(parsed.texts.contains("bell? & <tag>"))
    }

    @Test("Wakes by port, by wake-up and by deadline are each labelled")
    func wakeCauses() throws {
      let thread = LoopThread { loop in
        loop.run(for: .seconds(30))
      }
      let loop = thread.loop
      let recorder = Recorder()
      let port = try LoopPort<String>(label: "inbox") { recorder.log($0) }
      try loop.add(port, to: .default)
      let tracer = LoopTracer()
      try tracer.attach(to: loop)
      thread.start()
      #expect(waitUntil { loop.isWaiting })
      try port.send("hello")
      #expect(waitUntil { recorder.all == ["hello"] && loop.isWaiting })
      try loop.perform { recorder.log("block") }
      #expect(waitUntil { recorder.all == ["hello", "block"] && loop.isWaiting })
      try loop.perform { Loop.current.stop() }
      thread.join()
      tracer.detach()
      #expect(tracer.events.sleepCauses == [[.port("inbox")], [.wakeUp], [.wakeUp]])
      #expect(tracer.events.filter { $0.kind == .port("inbox") }.count == 1)
      port.invalidate()

      // A run that simply times out is woken by its deadline.
      let timedOut = try onLoopThread { loop -> [LoopTracer.Event] in
        try loop.add(LoopTimer(after: .seconds(60)) { _ in }, to: .default)
        let tracer = LoopTracer()
        try tracer.attach(to: loop)
        #expect(loop.run(for: .milliseconds(20)) == .timedOut)
        return tracer.events
      }
      #expect(timedOut.contains { $0.kind == .slept(wokenBy: [.deadline]) })
      #expect(timedOut.last?.kind == .returned(.timedOut))
    }

    @Test("Nothing is recorded before attach or after detach; misuse throws")
    func attachAndDetach() throws {
      try onLoopThread { loop in
        let tracer = LoopTracer()
        try loop.perform {}
        loop.run(for: .zero)
        #expect(tracer.events.isEmpty)
        try tracer.attach(to: loop)
        try tracer.attach(to: loop)  // attaching again to the same loop is harmless
        try loop.perform {}
        loop.run(for: .zero)
        let recorded = tracer.events.count
        #expect(recorded > 0)
        #expect(throws: LoopError.self) { try LoopTracer().attach(to: loop) }
        tracer.detach()
        try loop.perform {}
        loop.run(for: .zero)
        #expect(tracer.events.count == recorded)
        // Once detached, another tracer may follow the loop.
        let second = LoopTracer()
        try second.attach(to: loop)
        second.detach()
      }
      // A tracer follows one loop at a time.
      let tracer = LoopTracer()
      let threadA = LoopThread { loop in loop.run(for: .zero) }
      let threadB = LoopThread { loop in loop.run(for: .zero) }
      try tracer.attach(to: threadA.loop)
      #expect(throws: LoopError.self) { try tracer.attach(to: threadB.loop) }
      tracer.detach()
      threadA.start()
      threadB.start()
      threadA.join()
      threadB.join()
      // A loop whose thread has exited cannot be traced.
      let tornDown = try onLoopThread { loop in loop }
      #expect(throws: LoopError.loopTornDown(thread: tornDown.threadDescription)) {
        try LoopTracer().attach(to: tornDown)
      }
    }

    @Test("A full tracer keeps the newest events and counts the dropped ones")
    func ringKeepsNewest() throws {
      let (all, last) = try onLoopThread { loop -> ([LoopTracer.Event], [LoopTracer.Event]) in
        let everything = LoopTracer()
        try everything.attach(to: loop)
        for _ in 0..<3 {
          try loop.perform {}
          loop.run(for: .zero)
        }
        everything.detach()
        let five = LoopTracer(capacity: 5)
        try five.attach(to: loop)
        for _ in 0..<3 {
          try loop.perform {}
          loop.run(for: .zero)
        }
        five.detach()
        #expect(five.dropped == everything.events.count - 5)
        return (everything.events, five.events)
      }
      #expect(last.count == 5)
      #expect(last.map(\.kind) == all.suffix(5).map(\.kind))
    }

    @Test("The text timeline aligns its columns and says what woke the loop")
    func textTimeline() throws {
      let tracer = try tracedTimerRun()
      let text = tracer.timeline()
      let lines = text.split(separator: "\n").map(String.init)
      #expect(lines.first?.contains("what happened") == true)
      #expect(lines.count == tracer.events.count + 1)
      // Every row has its lane column at the same offset as the header's.
      let header = try #require(lines.first)
      let laneColumn = try #require(header.range(of: "lane")).lowerBound.utf16Offset(in: header)
      for line in lines.dropFirst() {
        let laneStart = line.index(line.startIndex, offsetBy: laneColumn)
        #expect(line[..<laneStart].hasSuffix("  "), "\(line)")
        #expect(line[laneStart] != " ", "\(line)")
      }
      #expect(text.contains("woken by timer"))
      #expect(text.contains("timer \"tick\" fired"))
      #expect(text.contains("run(in: default) returned .finished"))
    }

    @Test("The SVG is well-formed, has one lane per phase and labels each sleep's cause")
    func svgPicture() throws {
      let tracer = try tracedTimerRun()
      let svg = tracer.svg(title: "a <timer> & a run")
      let parsed = SVGSummary(svg)
      #expect(parsed.error == nil)
      #expect(parsed.root == "svg")
      for lane in LoopTracer.Lane.allCases { #expect(parsed.texts.contains(lane.description)) }
      #expect(parsed.texts.contains("woken by timer"))
      #expect(parsed.texts.contains("tick"))
      #expect(parsed.texts.contains { $0.hasPrefix("a <timer> & a run") })
      let activities = tracer.events.filter {
        if case .activity = $0.kind { return true } else { return false }
      }
      // One dot per activity, plus the six in the legend.
      #expect(parsed.circles == activities.count + 6)
    }

    /// One timer fire, traced: a one-shot timer "tick" 10 ms away, run until the mode empties.
    private func tracedTimerRun() throws -> LoopTracer {
      try onLoopThread { loop -> LoopTracer in
        try loop.add(LoopTimer(label: "tick", after: .milliseconds(10)) { _ in }, to: .default)
        let tracer = LoopTracer()
        try tracer.attach(to: loop)
        #expect(loop.run(for: .seconds(10)) == .finished)
        tracer.detach()
        return tracer
      }
    }

    private func isActivity(_ kind: Kind) -> Bool {
      if case .activity = kind { return true }
      return false
    }

    /// The descriptor cause the spin found, whatever fd number the pipe got.
    private func pipeCause(_ events: [LoopTracer.Event]) -> LoopTracer.WakeCause {
      for event in events {
        if case .descriptor("pipe", let fd, _) = event.kind { return .descriptor("pipe", fd: fd) }
      }
      return .descriptor("pipe", fd: -1)
    }
  }
}

/// What an XML parser saw in an SVG document: whether it is well-formed, its root element,
/// its text nodes and how many circles it draws.
final class SVGSummary: NSObject, XMLParserDelegate {
  var root: String?
  var texts: [String] = []
  var circles = 0
  var error: (any Error)?
  private var currentText: String?

  init(_ svg: String) {
    super.init()
    let parser = XMLParser(data: Data(svg.utf8))
    parser.delegate = self
    if !parser.parse() { error = parser.parserError ?? CocoaError(.coderReadCorrupt) }
  }

  func parser(
    _ parser: XMLParser, didStartElement name: String, namespaceURI: String?,
    qualifiedName: String?, attributes: [String: String] = [:]
  ) {
    if root == nil { root = name }
    if name == "circle" { circles += 1 }
    if name == "text" { currentText = "" }
  }

  func parser(_ parser: XMLParser, foundCharacters string: String) {
    currentText? += string
  }

  func parser(
    _ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?
  ) {
    if name == "text", let text = currentText { texts.append(text) }
    if name == "text" { currentText = nil }
  }
}
