/// The swim-lane picture of a trace.
///
/// Time runs left to right, but not to scale: callouts take microseconds and sleeps take
/// milliseconds, so a linear axis would show nothing but sleep. Each event gets a column
/// wide enough for its label, and each sleep is drawn as a fixed-width gap across every lane,
/// labelled with how long it lasted and what ended it. Times are written along the top at the
/// start and after every gap; hovering over any mark shows its exact time and duration.
extension LoopTracer {
  /// The recorded events as a standalone SVG document.
  public func svg(title: String = "RunLoopKit trace") -> String {
    LoopTracer.svg(panels: [("", events)], title: title)
  }

  /// Renders lists of events (from one tracer or several, a step of a demo each, say) as
  /// panels stacked top to bottom in one standalone SVG document, each with its caption.
  public static func svg(
    panels: [(caption: String, events: [Event])], title: String = "RunLoopKit trace"
  ) -> String {
    var y = 40.0
    var width = 400.0
    var body: [String] = []
    for panel in panels {
      var canvas = SwimLaneCanvas(panelTop: y, caption: panel.caption)
      canvas.drawAll(panel.events)
      body += canvas.elements()
      width = max(width, canvas.width)
      y = canvas.panelBottom + 16
    }
    let height = y + 40
    let count = panels.map(\.events.count).reduce(0, +)
    let header =
      "\(escapeXML(title)) — \(count) events. Columns are in order, not to scale; "
      + "shaded gaps are sleeps."
    let legend = SwimLaneCanvas.legend(atY: height - 22)
    return """
      <?xml version="1.0" encoding="UTF-8"?>
      <svg xmlns="http://www.w3.org/2000/svg" width="\(px(width))" height="\(px(height))" \
      viewBox="0 0 \(px(width)) \(px(height))" font-family="Helvetica, Arial, sans-serif">
      <rect width="100%" height="100%" fill="#ffffff"/>
      <text x="10" y="24" font-size="14" font-weight="bold" fill="#111">\(header)</text>
      \((body + legend).joined(separator: "\n"))
      </svg>

      """
  }

  /// One decimal place is plenty for pixels.
  static func px(_ value: Double) -> String {
    fixed(Int64(value * 10), unit: 10, decimals: 1)
  }

  static func escapeXML(_ text: String) -> String {
    var escaped = ""
    for character in text {
      switch character {
      case "&": escaped += "&amp;"
      case "<": escaped += "&lt;"
      case ">": escaped += "&gt;"
      case "\"": escaped += "&quot;"
      // XML 1.0 allows no other C0 control characters, even escaped.
      case _ where character.asciiValue.map { $0 < 0x20 && $0 != 0x09 && $0 != 0x0A } == true:
        escaped += "?"
      default: escaped.append(character)
      }
    }
    return escaped
  }
}

/// Lays out one panel's events column by column and collects its SVG elements.
struct SwimLaneCanvas {
  static let left = 130.0
  static let laneHeight = 46.0
  static let gapWidth = 150.0
  static let breakWidth = 64.0
  static let activities: [Loop.Activity] = [
    .entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .exit,
  ]

  let panelTop: Double
  let caption: String
  /// The top of the first lane: room for the caption and the time labels.
  let top: Double
  var x = left + 14
  /// Elements drawn behind the marks (gap bands, tick lines) and the marks themselves.
  var background: [String] = []
  var marks: [String] = []

  init(panelTop: Double, caption: String) {
    self.panelTop = panelTop
    self.caption = caption
    self.top = panelTop + (caption.isEmpty ? 46 : 64)
  }

  var lanesBottom: Double { top + Double(LoopTracer.Lane.allCases.count) * Self.laneHeight }
  var panelBottom: Double { lanesBottom + 20 }
  var width: Double { x + 40 }

  mutating func drawAll(_ events: [LoopTracer.Event]) {
    var previousEnd: Duration?
    for event in LoopTracer.inStartOrder(events) {
      // Time that passed outside any recorded event (between runs, inside an observer).
      if let previousEnd, event.start - previousEnd > .milliseconds(1), !event.isSleep {
        drawBreak(lasting: event.start - previousEnd, resumingAt: event.start)
      } else if previousEnd == nil {
        drawTimeTick(event.start)
      }
      draw(event)
      previousEnd = max(previousEnd ?? event.end, event.end)
    }
  }

  func centre(of lane: LoopTracer.Lane, depth: Int) -> Double {
    // Nested runs sit a little lower in each lane, so their marks stand apart.
    top + (Double(lane.rawValue) + 0.5) * Self.laneHeight + Double(min(depth - 1, 3)) * 5
  }

  mutating func draw(_ event: LoopTracer.Event) {
    let y = centre(of: event.lane, depth: event.depth)
    let took = event.duration > .zero && !event.isSleep
    let tip = escape(
      "\(LoopTracer.milliseconds(event.start)) ms · \(event.mode) · depth \(event.depth) · "
        + event.summary + (took ? " (\(LoopTracer.format(event.duration)))" : ""))
    switch event.kind {
    case .activity(let activity):
      let label = activity == .entry ? "enter \(event.mode)" : activity == .exit ? "exit" : nil
      marks.append(
        "<circle cx=\"\(f(x))\" cy=\"\(f(y))\" r=\"4.5\" fill=\"\(Self.color(of: activity))\">"
          + "<title>\(tip)</title></circle>")
      if let label { text(label, at: x + 7, y + 4, size: 11) }
      x += 14 + (label.map(Self.labelWidth) ?? 0)
    case .returned(let result):
      let label = "returned .\(result)"
      marks.append(
        "<path d=\"M\(f(x)) \(f(y - 6)) l6 6 l-6 6 l-6 -6 z\" fill=\"#444\">"
          + "<title>\(tip)</title></path>")
      text(label, at: x + 9, y + 4, size: 11)
      x += 16 + Self.labelWidth(label)
    case .slept(let causes):
      drawSleep(event, causes: causes, y: y, tip: tip)
    default:
      let label = shortLabel(event)
      marks.append(
        "<rect x=\"\(f(x - 4))\" y=\"\(f(y - 9))\" width=\"9\" height=\"18\" rx=\"2\" "
          + "fill=\"\(Self.color(of: event.lane))\"><title>\(tip)</title></rect>")
      text(label, at: x + 9, y + 4, size: 11)
      x += 18 + Self.labelWidth(label)
    }
  }

  /// A sleep: a shaded gap across every lane, a dashed line in the waiting lane, and what
  /// ended it.
  mutating func drawSleep(
    _ event: LoopTracer.Event, causes: [LoopTracer.WakeCause], y: Double, tip: String
  ) {
    let cause = "woken by " + causes.map(\.description).joined(separator: " + ")
    let width = max(Self.gapWidth, Self.labelWidth(cause) + 16)
    background.append(
      "<rect x=\"\(f(x))\" y=\"\(f(top))\" width=\"\(f(width))\" "
        + "height=\"\(f(lanesBottom - top))\" fill=\"#eef2f7\"><title>\(tip)</title></rect>")
    marks.append(
      "<line x1=\"\(f(x + 4))\" y1=\"\(f(y))\" x2=\"\(f(x + width - 4))\" y2=\"\(f(y))\" "
        + "stroke=\"#5b7fa6\" stroke-width=\"2\" stroke-dasharray=\"5 4\"/>")
    text("asleep \(LoopTracer.format(event.duration))", at: x + 8, y - 7, size: 11)
    text(cause, at: x + 8, y + 16, size: 11, weight: "bold")
    x += width
    drawTimeTick(event.end)
  }

  /// Time passing with nothing recorded: a narrow zig-zag gap.
  mutating func drawBreak(lasting duration: Duration, resumingAt start: Duration) {
    let middle = x + Self.breakWidth / 2
    let half = (lanesBottom - top) / 2
    background.append(
      "<path d=\"M\(f(middle - 4)) \(f(top)) l8 \(f(half)) l-8 \(f(half))\" fill=\"none\" "
        + "stroke=\"#bbb\"/>")
    text(LoopTracer.format(duration), at: x + 2, lanesBottom + 14, size: 10, fill: "#777")
    x += Self.breakWidth
    drawTimeTick(start)
  }

  /// A time label along the top with a faint line down through the lanes.
  mutating func drawTimeTick(_ time: Duration) {
    background.append(
      "<line x1=\"\(f(x))\" y1=\"\(f(top - 4))\" x2=\"\(f(x))\" y2=\"\(f(lanesBottom))\" "
        + "stroke=\"#d0d0d0\" stroke-width=\"1\"/>")
    marks.append(
      "<text x=\"\(f(x))\" y=\"\(f(top - 8))\" font-size=\"10\" fill=\"#555\" "
        + "transform=\"rotate(-35 \(f(x)) \(f(top - 8)))\">"
        + "\(LoopTracer.milliseconds(time)) ms</text>")
  }

  mutating func text(
    _ content: String, at x: Double, _ y: Double, size: Int, weight: String = "normal",
    fill: String = "#222"
  ) {
    marks.append(
      "<text x=\"\(f(x))\" y=\"\(f(y))\" font-size=\"\(size)\" font-weight=\"\(weight)\" "
        + "fill=\"\(fill)\">\(escape(content))</text>")
  }

  /// The panel: its caption, striped lanes with their names, then everything drawn.
  func elements() -> [String] {
    var lanes: [String] = []
    if !caption.isEmpty {
      lanes.append(
        "<text x=\"10\" y=\"\(f(panelTop + 18))\" font-size=\"13\" font-weight=\"bold\" "
          + "fill=\"#111\">\(escape(caption))</text>")
    }
    for lane in LoopTracer.Lane.allCases {
      let y = top + Double(lane.rawValue) * Self.laneHeight
      lanes.append(
        "<rect x=\"0\" y=\"\(f(y))\" width=\"\(f(width))\" height=\"\(f(Self.laneHeight))\" "
          + "fill=\"\(lane.rawValue % 2 == 0 ? "#fafafa" : "#ffffff")\"/>")
      lanes.append(
        "<text x=\"10\" y=\"\(f(y + Self.laneHeight / 2 + 4))\" font-size=\"12\" "
          + "font-weight=\"bold\" fill=\"#333\">\(escape(lane.description))</text>")
    }
    return lanes + background + marks
  }

  /// One coloured dot per activity, with its name.
  static func legend(atY y: Double) -> [String] {
    var legend: [String] = []
    var x = 10.0
    for activity in activities {
      legend.append(
        "<circle cx=\"\(LoopTracer.px(x + 5))\" cy=\"\(LoopTracer.px(y))\" r=\"4.5\" "
          + "fill=\"\(color(of: activity))\"/>"
          + "<text x=\"\(LoopTracer.px(x + 13))\" y=\"\(LoopTracer.px(y + 4))\" font-size=\"11\" "
          + "fill=\"#333\">\(activity)</text>")
      x += 26 + labelWidth("\(activity)")
    }
    return legend
  }

  func shortLabel(_ event: LoopTracer.Event) -> String {
    switch event.kind {
    case .blocks(let count): count == 1 ? "1 block" : "\(count) blocks"
    case .manualSource(let name): name
    case .timer(let name, _): name
    case .descriptor(let name, _, let events): "\(name) \(events)"
    case .port(let name): name
    case .mainQueue: "main queue"
    case .observer(let activity, _): "observer: \(activity)"
    case .signalSent(let name): "\(name) signalled by thread \(event.threadID)"
    case .wakeUpSent(let route): "woken by thread \(event.threadID) (\(route))"
    case .spun(let causes):
      "spun \(LoopTracer.format(event.duration))"
        + (causes.isEmpty ? "" : " → " + causes.map(\.description).joined(separator: " + "))
    default: event.summary
    }
  }

  static func labelWidth(_ label: String) -> Double { Double(label.count) * 6.4 }

  static func color(of activity: Loop.Activity) -> String {
    switch activity {
    case .entry: "#2e7d32"
    case .beforeTimers: "#ef6c00"
    case .beforeSources: "#6a1b9a"
    case .beforeWaiting: "#1565c0"
    case .afterWaiting: "#00838f"
    default: "#c62828"
    }
  }

  static func color(of lane: LoopTracer.Lane) -> String {
    switch lane {
    case .timers: "#fb8c00"
    case .sources: "#8e24aa"
    case .blocks: "#546e7a"
    case .descriptors: "#43a047"
    default: "#1e88e5"
    }
  }

  func f(_ value: Double) -> String { LoopTracer.px(value) }

  func escape(_ text: String) -> String { LoopTracer.escapeXML(text) }
}
