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
        let pipe = makePipe()
        defer {
          close(pipe.read)
          close(pipe.write)
        }
        let source = DescriptorSource(fileDescriptor: pipe.read, label: "pipe") { _, _ in
          drain(pipe.read)
          Loop.current.stop()
        }
        let manual = ManualSource(label: "manual") {}
        try loop.add(source, to: .default)
        try loop.add(manual, to: .default)
        try loop.add(
          LoopTimer(label: "tick", after: .milliseconds(30)) { _ in writeByte(pipe.write) },
          to: .default)
        let tracer = LoopTracer()
        try tracer.attach(to: loop)
        try loop.perform {}
        manual.signal()
        #expect(loop.run(for: .seconds(10)) == .stopped)
        tracer.detach()
        source.invalidate()
        manual.invalidate()
        return (tracer.events, pipe.read)
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
      #expect(events.map { withoutLateness($0.kind) } == expected)
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
      let shape = events.map { "\($0.depth) \($0.mode) \(withoutLateness($0.kind))" }
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
      let sleeps = tracer.events.compactMap { event -> [LoopTracer.WakeCause]? in
        if case .slept(let causes) = event.kind { return causes }
        return nil
      }
      #expect(sleeps == [[.port("inbox")], [.wakeUp], [.wakeUp]])
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
      #expect(throws: LoopError.loopTornDown(thread: "\(tornDown.threadID)")) {
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

    private func withoutLateness(_ kind: Kind) -> Kind {
      if case .timer(let name, _) = kind { return .timer(name, lateness: .zero) }
      return kind
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
