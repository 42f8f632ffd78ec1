import Glibc

/// One entry of a Chrome trace's `traceEvents` array. Times stay integer nanoseconds until the
/// entry is written, as microseconds with three decimals: exact, so rounding can never make a
/// child slice poke out of its parent.
struct ChromeTraceEvent {
  /// The `ph` field.
  enum Phase: String {
    /// A slice with a `dur`.
    case complete = "X"
    /// A point on the thread's track (`s: "t"`).
    case instant = "i"
    /// Names a process or a thread; no time of its own.
    case metadata = "M"
  }

  /// A value in `args`.
  enum Value {
    case string(String)
    case integer(Int)
    /// Nanoseconds, written as microseconds.
    case microseconds(Int64)
  }

  var name: String
  var category: String?
  var phase: Phase
  /// Nanoseconds since the trace's time zero.
  var start: Int64
  var duration: Int64 = 0
  var pid: pid_t
  var tid: pid_t
  var args: [(String, Value)] = []
  /// Orders slices that start at the same time and last as long (virtual time makes every
  /// callout zero long): a run before its passes, a pass before its callouts.
  var level = 0

  var end: Int64 { start.clampedAdding(duration) }

  /// The entry as one JSON object, keys in the order the format's documents list them.
  var json: String {
    var fields = ["\"name\":" + JSONText.quoted(name)]
    if let category { fields.append("\"cat\":" + JSONText.quoted(category)) }
    fields.append("\"ph\":\"\(phase.rawValue)\"")
    fields.append("\"ts\":" + JSONText.microseconds(start))
    if phase == .complete { fields.append("\"dur\":" + JSONText.microseconds(duration)) }
    fields.append("\"pid\":\(pid)")
    fields.append("\"tid\":\(tid)")
    if phase == .instant { fields.append("\"s\":\"t\"") }
    if !args.isEmpty {
      let members = args.map { JSONText.quoted($0.0) + ":" + JSONText.value($0.1) }
      fields.append("\"args\":{" + members.joined(separator: ",") + "}")
    }
    return "{" + fields.joined(separator: ",") + "}"
  }

  /// The order of `traceEvents`: by start; among slices starting together the longer (the
  /// parent) first, then the outer level; otherwise as made.
  static func inTraceOrder(_ events: [ChromeTraceEvent]) -> [ChromeTraceEvent] {
    events.enumerated().sorted { a, b in
      let (x, y) = (a.element, b.element)
      if x.start != y.start { return x.start < y.start }
      if x.duration != y.duration { return x.duration > y.duration }
      if x.level != y.level { return x.level < y.level }
      return a.offset < b.offset
    }.map(\.element)
  }
}

extension Int64 {
  /// `self + other`, held at the bounds instead of trapping: a hand-made `Snapshot` may hold
  /// any times.
  func clampedAdding(_ other: Int64) -> Int64 {
    let (sum, overflow) = addingReportingOverflow(other)
    return overflow ? (other > 0 ? .max : .min) : sum
  }

  /// `self - other`, held at the bounds instead of trapping.
  func clampedSubtracting(_ other: Int64) -> Int64 {
    let (difference, overflow) = subtractingReportingOverflow(other)
    return overflow ? (other < 0 ? .max : .min) : difference
  }
}
