import Foundation

/// A Chrome trace parsed by JSONSerialization, with what the format asks of every event.
struct ParsedChromeTrace {
  let top: [String: Any]
  let events: [[String: Any]]

  init(_ json: String) throws {
    let object = try JSONSerialization.jsonObject(with: Data(json.utf8))
    guard let top = object as? [String: Any], let events = top["traceEvents"] as? [[String: Any]]
    else { throw CocoaError(.coderReadCorrupt) }
    self.top = top
    self.events = events
  }

  /// The thread names the metadata gives, by tid.
  var threadNames: [Int: String] {
    var names: [Int: String] = [:]
    for event in events where string(event["name"]) == "thread_name" {
      if let tid = int(event["tid"]) { names[tid] = arg(event, "name") }
    }
    return names
  }

  /// What breaks the format's rules: a missing field, an unknown phase, a negative duration,
  /// an instant without thread scope, a tid without a thread name, slices that overlap on
  /// one track without nesting.
  var problems: [String] {
    var problems: [String] = []
    var used: Set<Int> = []
    for event in events {
      let name = string(event["name"])
      guard !name.isEmpty, number(event["ts"]) != nil, let tid = int(event["tid"]),
        int(event["pid"]) != nil
      else {
        problems.append("missing name, ts, pid or tid: \(event)")
        continue
      }
      switch string(event["ph"]) {
      case "X":
        if (number(event["dur"]) ?? -1) < 0 { problems.append("no duration: \(name)") }
        if string(event["cat"]).isEmpty { problems.append("no category: \(name)") }
        used.insert(tid)
      case "i":
        if string(event["s"]) != "t" { problems.append("instant not thread-scoped: \(name)") }
        used.insert(tid)
      case "M":
        if !["process_name", "thread_name", "thread_sort_index"].contains(name) {
          problems.append("unknown metadata \(name)")
        }
      default: problems.append("unknown phase: \(event)")
      }
    }
    for tid in used.subtracting(threadNames.keys) { problems.append("tid \(tid) has no name") }
    for tid in used { problems += nestingProblems(on: tid) }
    return problems
  }

  /// A stack of open slices: each slice must end before or inside the innermost one open.
  private func nestingProblems(on tid: Int) -> [String] {
    // By start, and among slices starting together the longest (the outermost) first.
    let spans = slices(on: tid).map { (span: nanoseconds($0), name: string($0["name"])) }
      .sorted { ($0.span.start, -$0.span.end) < ($1.span.start, -$1.span.end) }
    var open: [(span: (start: Int64, end: Int64), name: String)] = []
    var problems: [String] = []
    for slice in spans {
      while let last = open.last, last.span.end <= slice.span.start, last.span != slice.span {
        open.removeLast()
      }
      if let last = open.last, slice.span.end > last.span.end {
        problems.append("\(slice.name) \(slice.span) overlaps \(last.name) \(last.span)")
      }
      open.append(slice)
    }
    return problems
  }

  func slices(on tid: Int, category: String? = nil) -> [[String: Any]] {
    events.filter { event in
      string(event["ph"]) == "X" && int(event["tid"]) == tid
        && (category.map { string(event["cat"]) == $0 } ?? true)
    }
  }

  func instants(on tid: Int, category: String? = nil, named name: String? = nil) -> [[String: Any]]
  {
    events.filter { event in
      string(event["ph"]) == "i" && int(event["tid"]) == tid
        && (category.map { string(event["cat"]) == $0 } ?? true)
        && (name.map { string(event["name"]) == $0 } ?? true)
    }
  }

  func names(on tid: Int, category: String) -> [String] {
    slices(on: tid, category: category).map { string($0["name"]) }
  }

  /// Whether slice `outer` spans slice `inner`, ends included.
  func contains(_ outer: [String: Any], _ inner: [String: Any]) -> Bool {
    let (a, b) = (nanoseconds(outer), nanoseconds(inner))
    return a.start <= b.start && b.end <= a.end
  }

  /// A slice's span in integer nanoseconds (the file has microseconds with three decimals).
  func nanoseconds(_ event: [String: Any]) -> (start: Int64, end: Int64) {
    let start = Int64(((number(event["ts"]) ?? 0) * 1_000).rounded())
    return (start, start + Int64(((number(event["dur"]) ?? 0) * 1_000).rounded()))
  }

  func arg(_ event: [String: Any], _ key: String) -> String {
    string((event["args"] as? [String: Any])?[key])
  }

  func string(_ value: Any?) -> String { value as? String ?? "" }
  func number(_ value: Any?) -> Double? { (value as? NSNumber)?.doubleValue }
  func number(_ args: Any?, _ key: String) -> Double? { number((args as? [String: Any])?[key]) }
  func int(_ value: Any?) -> Int? { (value as? NSNumber)?.intValue }
  func int(_ args: Any?, _ key: String) -> Int? { int((args as? [String: Any])?[key]) }
}
