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
  /// an instant without thread scope, a tid without a thread name, a name record without its
  /// `args.name`, slices that overlap on one track without nesting.
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
        let key = name == "thread_sort_index" ? "sort_index" : "name"
        if (event["args"] as? [String: Any])?[key] == nil {
          problems.append("\(name) without args.\(key): tid \(tid)")
        }
      default: problems.append("unknown phase: \(event)")
      }
    }
    for tid in used.subtracting(threadNames.keys) { problems.append("tid \(tid) has no name") }
    for tid in used { problems += drawn(on: tid).problems }
    return problems
  }

  /// The slice Perfetto draws `event` (a slice or an instant) inside, if any.
  func parent(of event: [String: Any]) -> [String: Any]? {
    guard let index = events.firstIndex(where: { ($0 as NSDictionary).isEqual(to: event) }),
      let tid = int(event["tid"]), let parent = drawn(on: tid).parents[index]
    else { return nil }
    return events[parent]
  }

  /// The slices Perfetto draws `event` inside, innermost first.
  func ancestors(of event: [String: Any]) -> [[String: Any]] {
    var chain: [[String: Any]] = []
    var next = parent(of: event)
    while let slice = next {
      chain.append(slice)
      next = parent(of: slice)
    }
    return chain
  }

  /// What Perfetto's importer makes of one track (its SliceTracker): the events by start, a
  /// slice before the slices and instants starting with it when it is longer; a slice ends
  /// (is popped) at the first event starting at or after its end, so one lasting no time never
  /// holds anything; an event that starts inside the open slice is its child and must end by
  /// its end. No exception for slices with identical spans.
  private func drawn(on tid: Int) -> (parents: [Int: Int], problems: [String]) {
    let onTrack = events.indices.filter {
      int(events[$0]["tid"]) == tid && ["X", "i"].contains(string(events[$0]["ph"]))
    }
    let spans = onTrack.map { (index: $0, span: nanoseconds(events[$0])) }
      .sorted {
        ($0.span.start, $0.span.start - $0.span.end, $0.index)
          < ($1.span.start, $1.span.start - $1.span.end, $1.index)
      }
    var open: [(index: Int, end: Int64)] = []
    var parents: [Int: Int] = [:]
    var problems: [String] = []
    for item in spans {
      while let last = open.last, last.end <= item.span.start { open.removeLast() }
      if let last = open.last, item.span.end > last.end {
        let (name, outer) = (string(events[item.index]["name"]), events[last.index])
        problems.append(
          "\(name) \(item.span) overlaps \(string(outer["name"])) \(nanoseconds(outer))")
      }
      if let last = open.last { parents[item.index] = last.index }
      if string(events[item.index]["ph"]) == "X" {
        open.append((item.index, item.span.end))
      }
    }
    return (parents, problems)
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

  /// Whether slice `outer` spans slice `inner`, ends included (in time; see `parent(of:)` for
  /// what a viewer draws).
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
