/// The text rendering of a trace, and the vocabulary (lanes, one-line descriptions) the SVG
/// rendering shares.
extension LoopTracer {
  /// The swim lanes of a trace, top to bottom in the order a pass visits them. Each activity
  /// sits in the lane of the phase it announces, and so do the observers told of it.
  public enum Lane: Int, CaseIterable, Sendable, CustomStringConvertible {
    /// Entry, exit, and what each run returned.
    case run
    /// beforeTimers and the timers that fired.
    case timers
    /// beforeSources, the manual sources performed, and signals other threads sent them.
    case sources
    /// `perform` blocks.
    case blocks
    /// beforeWaiting, the sleep, afterWaiting, and wake-ups other threads sent.
    case waiting
    /// Descriptor sources and ports handled after a wake.
    case descriptors

    /// The lane's label in a timeline, such as `timers` or `fds & ports`.
    public var description: String {
      switch self {
      case .run: "run"
      case .timers: "timers"
      case .sources: "sources"
      case .blocks: "blocks"
      case .waiting: "waiting"
      case .descriptors: "fds & ports"
      }
    }
  }

  /// The recorded events as aligned text, one line each: time since the tracer was created,
  /// mode, lane, then what happened (indented by nesting depth) and how long it took.
  public func timeline() -> String {
    LoopTracer.timeline(of: events, dropped: dropped)
  }

  /// Renders any list of events (a filtered slice of `events`, say) as text, in order of
  /// their start: a callout is recorded when it returns, so a block that ran a nested run is
  /// recorded after the nested run's events but shown before them.
  public static func timeline(of events: [Event], dropped: Int = 0) -> String {
    let events = inStartOrder(events)
    let timeWidth = max(10, events.map { milliseconds($0.start).count }.max() ?? 0)
    let modeWidth = max(4, events.map { $0.mode.name.count }.max() ?? 0)
    let laneWidth = Lane.allCases.map { $0.description.count }.max() ?? 0
    var lines: [String] = []
    if dropped > 0 { lines.append("(\(dropped) earlier events dropped: the tracer was full)") }
    lines.append(
      pad("time ms", timeWidth, right: true) + "  " + pad("mode", modeWidth) + "  "
        + pad("lane", laneWidth) + "  what happened")
    for event in events {
      let indent = String(repeating: "  ", count: max(0, event.depth - 1))
      var what = indent + event.summary
      if event.duration > .zero, !event.isSleep { what += "  (\(format(event.duration)))" }
      lines.append(
        pad(milliseconds(event.start), timeWidth, right: true) + "  "
          + pad(event.mode.name, modeWidth)
          + "  " + pad(event.lane.description, laneWidth) + "  " + what)
    }
    return lines.joined(separator: "\n")
  }

  /// Sorted by start time; events that start together keep the order they were recorded in.
  static func inStartOrder(_ events: [Event]) -> [Event] {
    events.enumerated().sorted { ($0.element.start, $0.offset) < ($1.element.start, $1.offset) }
      .map(\.element)
  }

  /// A duration the way a person reads it: "850 ns", "12.4 µs", "3.21 ms", "1.50 s".
  public static func format(_ duration: Duration) -> String {
    let nanoseconds = duration.saturatedNanoseconds
    let magnitude = nanoseconds.magnitude
    if magnitude < 1_000 { return "\(nanoseconds) ns" }
    if magnitude < 1_000_000 { return fixed(nanoseconds, unit: 1_000, decimals: 1) + " µs" }
    if magnitude < 1_000_000_000 { return fixed(nanoseconds, unit: 1_000_000, decimals: 2) + " ms" }
    return fixed(nanoseconds, unit: 1_000_000_000, decimals: 2) + " s"
  }

  /// A time since the origin in milliseconds with three decimals (microsecond resolution).
  static func milliseconds(_ duration: Duration) -> String {
    fixed(duration.saturatedNanoseconds, unit: 1_000_000, decimals: 3)
  }

  /// `value / unit` rounded to `decimals` places, without Foundation's formatters.
  static func fixed(_ value: Int64, unit: Int64, decimals: Int) -> String {
    var scale: Int64 = 1
    for _ in 0..<decimals { scale *= 10 }
    let scaled = (Double(value) / Double(unit) * Double(scale)).rounded()
    let magnitude = Int64(scaled.magnitude)
    let whole = magnitude / scale
    let fraction = String(magnitude % scale)
    let sign = scaled < 0 ? "-" : ""
    if decimals == 0 { return sign + String(whole) }
    return sign + String(whole) + "."
      + String(repeating: "0", count: decimals - fraction.count) + fraction
  }

  static func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
    let padding = String(repeating: " ", count: max(0, width - text.count))
    return right ? padding + text : text + padding
  }
}

extension LoopTracer.Event {
  /// The lane this event is drawn in.
  public var lane: LoopTracer.Lane {
    switch kind {
    case .activity(let activity), .observer(let activity, _): Self.lane(of: activity)
    case .returned: .run
    case .timer: .timers
    case .manualSource: .sources
    case .blocks: .blocks
    case .slept, .spun, .wakeUpSent: .waiting
    case .descriptor, .port, .mainQueue: .descriptors
    case .signalSent: .sources
    }
  }

  /// The lane of the phase `activity` announces.
  private static func lane(of activity: Loop.Activity) -> LoopTracer.Lane {
    switch activity {
    case .beforeTimers: .timers
    case .beforeSources: .sources
    case .beforeWaiting, .afterWaiting: .waiting
    default: .run
    }
  }

  var isSleep: Bool {
    if case .slept = kind { return true }
    return false
  }

  /// Recorded on the thread that sent it to the loop, not on the loop's own.
  var isSent: Bool {
    switch kind {
    case .signalSent, .wakeUpSent: true
    default: false
    }
  }

  /// What happened, in a few words.
  public var summary: String {
    switch kind {
    case .activity(let activity):
      switch activity {
      case .entry: "▶ entry"
      case .exit: "◀ exit"
      case .beforeWaiting: "beforeWaiting: nothing to do, going to sleep"
      case .afterWaiting: "afterWaiting"
      default: "\(activity)"
      }
    case .returned(let result):
      "run(in: \(mode)) returned .\(result)"
    case .blocks(let count):
      count == 1 ? "ran 1 block" : "ran \(count) blocks"
    case .manualSource(let name):
      "performed " + (name == "manual source" ? name : "manual source \"\(name)\"")
    case .timer(let name, let lateness):
      (isDefaultTimerName(name) ? name : "timer \"\(name)\"")
        + " fired \(LoopTracer.format(lateness)) after its fire date"
    case .descriptor(let name, let fd, let events):
      (name == "fd \(fd)" ? name : "\"\(name)\" (fd \(fd))") + " is \(events)"
    case .port(let name):
      (name == "port" ? name : "port \"\(name)\"") + " delivered its messages"
    case .mainQueue:
      "served the main queue (DispatchQueue.main blocks, @MainActor jobs)"
    case .slept(let causes):
      "slept \(LoopTracer.format(duration)), woken by "
        + causes.map(\.description).joined(separator: " + ")
    case .spun(let causes):
      "spun \(LoopTracer.format(duration)) instead of sleeping, "
        + (causes.isEmpty
          ? "nothing came"
          : "then found " + causes.map(\.description).joined(separator: " + "))
    case .observer(let activity, let order):
      "observer told of \(activity)" + (order == 0 ? "" : " (order \(order))")
    case .signalSent(let name):
      "thread \(threadID) signalled "
        + (name == "manual source" ? name : "manual source \"\(name)\"")
    case .wakeUpSent(let route):
      "thread \(threadID) woke the loop (\(route))"
    }
  }

  private func isDefaultTimerName(_ name: String) -> Bool {
    name == "one-shot timer" || name.hasPrefix("timer every ")
  }
}
