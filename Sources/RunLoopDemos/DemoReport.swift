import RunLoopKit

/// What a scenario shows: its steps, each with the trace of what the loop did and notes on
/// what to see in it, then a paragraph on why it happened.
public struct DemoReport: Sendable {
  public let name: String
  public let title: String
  public var steps: [DemoStep] = []
  public var explanation = ""

  public init(name: String, title: String) {
    self.name = name
    self.title = title
  }

  /// The report as the terminal shows it.
  public func text() -> String {
    var lines = ["== \(name): \(title) ==", ""]
    for (number, step) in steps.enumerated() {
      lines.append("\(number + 1). \(step.caption)")
      if let shown = step.shown, shown.count != step.events.count {
        lines.append("   (\(shown.count) of \(step.events.count) events: \(step.filterNote))")
      }
      let timeline = LoopTracer.timeline(of: step.shown ?? step.events)
      lines += timeline.split(separator: "\n").map { "   " + $0 }
      lines += step.notes.map { "   → " + $0 }
      lines.append("")
    }
    lines.append("Why:")
    lines += wrap(explanation, width: 96).map { "   " + $0 }
    return lines.joined(separator: "\n") + "\n"
  }

  /// The report's traces as an SVG document: one panel of swim lanes per step.
  public func svg() -> String {
    LoopTracer.svg(
      panels: steps.enumerated().map {
        ("\($0.offset + 1). \($0.element.caption)", $0.element.events)
      },
      title: "runloop-demo \(name): \(title)")
  }

  /// The report's traces as one Chrome Trace Event file for Perfetto: every step's tracer on
  /// one time line, a track per thread. (A step with events but no snapshot counts them
  /// from `VirtualLoop.defaultStart`, as a `VirtualLoop()` does.)
  public func chromeTraceJSON() -> String {
    var snapshots: [LoopTracer.Snapshot] = []
    for step in steps {
      let snapshot =
        step.trace ?? LoopTracer.Snapshot(origin: VirtualLoop.defaultStart, events: step.events)
      if !snapshots.contains(snapshot) { snapshots.append(snapshot) }
    }
    return LoopTracer.chromeTraceJSON(snapshots: snapshots, processName: "runloop-demo \(name)")
  }
}

/// One step of a scenario.
public struct DemoStep: Sendable {
  public let caption: String
  /// Everything the tracer recorded during the step.
  public let events: [LoopTracer.Event]
  /// The tracer's snapshot, which places `events` in time and names their threads (for the
  /// Chrome trace); nil when the step was given events alone.
  public let trace: LoopTracer.Snapshot?
  /// What the text report prints when not all of it (a long trace, filtered).
  public var shown: [LoopTracer.Event]?
  public var filterNote = ""
  public var notes: [String]

  public init(caption: String, events: [LoopTracer.Event], notes: [String] = []) {
    self.caption = caption
    self.events = events
    self.trace = nil
    self.notes = notes
  }

  /// A step traced by one tracer: `trace` is its `snapshot()`.
  public init(caption: String, trace: LoopTracer.Snapshot, notes: [String] = []) {
    self.caption = caption
    self.events = trace.events
    self.trace = trace
    self.notes = notes
  }
}

/// Breaks a paragraph into lines of at most `width` characters, at spaces.
func wrap(_ paragraph: String, width: Int) -> [String] {
  var lines: [String] = []
  var line = ""
  for word in paragraph.split(separator: " ") {
    if !line.isEmpty && line.count + 1 + word.count > width {
      lines.append(line)
      line = ""
    }
    line += (line.isEmpty ? "" : " ") + word
  }
  if !line.isEmpty { lines.append(line) }
  return lines
}
