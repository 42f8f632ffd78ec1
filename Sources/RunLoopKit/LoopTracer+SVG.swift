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
    LoopTracer.svg(of: events, title: title)
  }

  /// Renders any list of events as a standalone SVG document.
  public static func svg(of events: [Event], title: String = "RunLoopKit trace") -> String {
    var canvas = SwimLaneCanvas()
    var previousEnd: Duration?
    for event in events {
      // Time that passed outside any recorded event (between runs, inside an observer).
      if let previousEnd, event.start - previousEnd > .milliseconds(1), !event.isSleep {
        canvas.drawBreak(lasting: event.start - previousEnd, resumingAt: event.start)
      } else if previousEnd == nil {
        canvas.drawTimeTick(event.start)
      }
      canvas.draw(event)
      previousEnd = max(previousEnd ?? event.end, event.end)
    }
    return canvas.document(title: title, eventCount: events.count)
  }
}

/// Lays out events column by column and collects the SVG elements.
struct SwimLaneCanvas {
  static let left = 130.0
  static let top = 86.0
  static let laneHeight = 46.0
  static let gapWidth = 150.0
  static let breakWidth = 64.0

  var x = left + 14
  /// Elements drawn behind the marks (gap bands, tick lines) and the marks themselves.
  var background: [String] = []
  var marks: [String] = []

  var lanesBottom: Double { Self.top + Double(LoopTracer.Lane.allCases.count) * Self.laneHeight }

  func centre(of lane: LoopTracer.Lane, depth: Int) -> Double {
    // Nested runs sit a little lower in each lane, so their marks stand apart.
    Self.top + (Double(lane.rawValue) + 0.5) * Self.laneHeight + Double(min(depth - 1, 3)) * 5
  }

  mutating func draw(_ event: LoopTracer.Event) {
    let y = centre(of: event.lane, depth: event.depth)
    let tip = escape(
      "\(LoopTracer.milliseconds(event.start)) ms · \(event.mode) · depth \(event.depth) · "
        + event.summary
        + (event.duration > .zero && !event.isSleep
          ? " (\(LoopTracer.format(event.duration)))" : ""))
    switch event.kind {
    case .activity(let activity):
      let label = activity == .entry ? "enter \(event.mode)" : activity == .exit ? "exit" : nil
      marks.append(
        "<circle cx=\"\(f(x))\" cy=\"\(f(y))\" r=\"4.5\" fill=\"\(color(of: activity))\">"
          + "<title>\(tip)</title></circle>")
      if let label { text(label, at: x + 7, y + 4, size: 11) }
      x += 14 + (label.map(labelWidth) ?? 0)
    case .returned(let result):
      let label = "returned .\(result)"
      marks.append(
        "<path d=\"M\(f(x)) \(f(y - 6)) l6 6 l-6 6 l-6 -6 z\" fill=\"#444\"><title>\(tip)</title></path>"
      )
      text(label, at: x + 9, y + 4, size: 11)
      x += 16 + labelWidth(label)
    case .slept(let causes):
      drawSleep(event, causes: causes, y: y, tip: tip)
    default:
      let label = shortLabel(event)
      marks.append(
        "<rect x=\"\(f(x - 4))\" y=\"\(f(y - 9))\" width=\"9\" height=\"18\" rx=\"2\" "
          + "fill=\"\(color(of: event.lane))\"><title>\(tip)</title></rect>")
      text(label, at: x + 9, y + 4, size: 11)
      x += 18 + labelWidth(label)
    }
  }

  /// A sleep: a shaded gap across every lane, a dashed line in the waiting lane, and what
  /// ended it.
  mutating func drawSleep(
    _ event: LoopTracer.Event, causes: [LoopTracer.WakeCause], y: Double, tip: String
  ) {
    let width = Self.gapWidth
    background.append(
      "<rect x=\"\(f(x))\" y=\"\(f(Self.top))\" width=\"\(f(width))\" "
        + "height=\"\(f(lanesBottom - Self.top))\" fill=\"#eef2f7\"><title>\(tip)</title></rect>")
    marks.append(
      "<line x1=\"\(f(x + 4))\" y1=\"\(f(y))\" x2=\"\(f(x + width - 4))\" y2=\"\(f(y))\" "
        + "stroke=\"#5b7fa6\" stroke-width=\"2\" stroke-dasharray=\"5 4\"/>")
    text("asleep \(LoopTracer.format(event.duration))", at: x + 8, y - 7, size: 11)
    let cause = causes.map(\.description).joined(separator: " + ")
    text("woken by \(cause)", at: x + 8, y + 16, size: 11, weight: "bold")
    x += width
    drawTimeTick(event.end)
  }

  /// Time passing with nothing recorded: a narrow zig-zag gap.
  mutating func drawBreak(lasting duration: Duration, resumingAt start: Duration) {
    let middle = x + Self.breakWidth / 2
    background.append(
      "<path d=\"M\(f(middle - 4)) \(f(Self.top)) l8 \(f((lanesBottom - Self.top) / 2)) "
        + "l-8 \(f((lanesBottom - Self.top) / 2))\" fill=\"none\" stroke=\"#bbb\"/>")
    text(LoopTracer.format(duration), at: x + 2, lanesBottom + 14, size: 10, fill: "#777")
    x += Self.breakWidth
    drawTimeTick(start)
  }

  /// A time label along the top with a faint line down through the lanes.
  mutating func drawTimeTick(_ time: Duration) {
    background.append(
      "<line x1=\"\(f(x))\" y1=\"\(f(Self.top - 4))\" x2=\"\(f(x))\" y2=\"\(f(lanesBottom))\" "
        + "stroke=\"#d0d0d0\" stroke-width=\"1\"/>")
    marks.append(
      "<text x=\"\(f(x))\" y=\"\(f(Self.top - 8))\" font-size=\"10\" fill=\"#555\" "
        + "transform=\"rotate(-35 \(f(x)) \(f(Self.top - 8)))\">"
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

  func document(title: String, eventCount: Int) -> String {
    let width = x + 40
    let height = lanesBottom + 70
    var lanes: [String] = []
    for lane in LoopTracer.Lane.allCases {
      let y = Self.top + Double(lane.rawValue) * Self.laneHeight
      lanes.append(
        "<rect x=\"0\" y=\"\(f(y))\" width=\"\(f(width))\" height=\"\(f(Self.laneHeight))\" "
          + "fill=\"\(lane.rawValue % 2 == 0 ? "#fafafa" : "#ffffff")\"/>")
      lanes.append(
        "<text x=\"10\" y=\"\(f(y + Self.laneHeight / 2 + 4))\" font-size=\"12\" "
          + "font-weight=\"bold\" fill=\"#333\">\(escape(lane.description))</text>")
    }
    var legend: [String] = []
    var legendX = 10.0
    let activities: [Loop.Activity] = [
      .entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .exit,
    ]
    for activity in activities {
      legend.append(
        "<circle cx=\"\(f(legendX + 5))\" cy=\"\(f(height - 22))\" r=\"4.5\" "
          + "fill=\"\(color(of: activity))\"/>"
          + "<text x=\"\(f(legendX + 13))\" y=\"\(f(height - 18))\" font-size=\"11\" "
          + "fill=\"#333\">\(activity)</text>")
      legendX += 26 + labelWidth("\(activity)")
    }
    let header =
      "\(escape(title)) — \(eventCount) events. Columns are in order, not to scale; "
      + "shaded gaps are sleeps."
    return """
      <?xml version="1.0" encoding="UTF-8"?>
      <svg xmlns="http://www.w3.org/2000/svg" width="\(f(width))" height="\(f(height))" \
      viewBox="0 0 \(f(width)) \(f(height))" font-family="Helvetica, Arial, sans-serif">
      <rect width="100%" height="100%" fill="#ffffff"/>
      <text x="10" y="22" font-size="14" font-weight="bold" fill="#111">\(header)</text>
      \((lanes + background + marks + legend).joined(separator: "\n"))
      </svg>

      """
  }

  func shortLabel(_ event: LoopTracer.Event) -> String {
    switch event.kind {
    case .blocks(let count): count == 1 ? "1 block" : "\(count) blocks"
    case .manualSource(let name): name
    case .timer(let name, _): name
    case .descriptor(let name, _, let events): "\(name) \(events)"
    case .port(let name): name
    default: event.summary
    }
  }

  func labelWidth(_ label: String) -> Double { Double(label.count) * 6.4 }

  func color(of activity: Loop.Activity) -> String {
    switch activity {
    case .entry: "#2e7d32"
    case .beforeTimers: "#ef6c00"
    case .beforeSources: "#6a1b9a"
    case .beforeWaiting: "#1565c0"
    case .afterWaiting: "#00838f"
    default: "#c62828"
    }
  }

  func color(of lane: LoopTracer.Lane) -> String {
    switch lane {
    case .timers: "#fb8c00"
    case .sources: "#8e24aa"
    case .blocks: "#546e7a"
    case .descriptors: "#43a047"
    default: "#1e88e5"
    }
  }

  /// One decimal place is plenty for pixels.
  func f(_ value: Double) -> String { LoopTracer.fixed(Int64(value * 10), unit: 10, decimals: 1) }

  func escape(_ text: String) -> String {
    var escaped = ""
    for character in text {
      switch character {
      case "&": escaped += "&amp;"
      case "<": escaped += "&lt;"
      case ">": escaped += "&gt;"
      case "\"": escaped += "&quot;"
      default: escaped.append(character)
      }
    }
    return escaped
  }
}
