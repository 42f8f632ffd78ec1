import Glibc

/// Turns the events one loop recorded on its thread into that track's Chrome trace events:
/// each callout, sleep and spin a slice of its own, activities and stray returns instants,
/// and around them the slices the tracer does not record but its activities mark — a run
/// (entry to return) and each pass (beforeTimers to the next beforeTimers, or to exit).
///
/// Events come in the order recorded, which nests: a callout is recorded when it returns,
/// after the events of any run nested in it, so it adopts them as its children then. A run
/// or pass is open until an event at a shallower depth comes (the loop was back out of it),
/// which also closes runs a detach cut short. The result is a tree, for virtual time's
/// `spreadInstants()`.
struct ChromeTraceSlicer {
  let pid: pid_t
  let tid: pid_t
  /// Every slice and instant made so far; an open run's or pass's is filled in on closing.
  private(set) var nodes: [ChromeTraceEvent] = []
  private var children: [[Int]] = []
  private var depths: [Int] = []
  /// The nodes no slice holds, in the order recorded.
  private var roots: [Int] = []
  /// The runs and passes under way, outermost first.
  private var open: [OpenSlice] = []

  private struct OpenSlice {
    var node: Int
    var isRun: Bool
    var depth: Int
    var mode: Loop.Mode
    var start: Int64
    /// The latest end of anything inside so far: where a slice cut short ends.
    var latestEnd: Int64
    /// A run: the passes begun so far. A pass: its number in its run.
    var passes = 0
  }

  init(pid: pid_t, tid: pid_t) {
    self.pid = pid
    self.tid = tid
  }

  /// Adds `event`, which starts `start` nanoseconds after the trace's time zero.
  mutating func add(_ event: LoopTracer.Event, at start: Int64) {
    let end = start.clampedAdding(event.duration.saturatedNanoseconds)
    let depth = event.depth
    close { $0.depth > depth }
    var shown = true
    switch event.kind {
    case .activity(.entry):
      close { $0.depth >= depth }
      openSlice(isRun: true, depth: depth, mode: event.mode, start: start, passes: 0)
    case .activity(.beforeTimers):
      close(at: start) { !$0.isRun && $0.depth == depth }
      var number = 1
      if let run = open.lastIndex(where: { $0.isRun && $0.depth == depth }) {
        open[run].passes += 1
        number = open[run].passes
      }
      openSlice(isRun: false, depth: depth, mode: event.mode, start: start, passes: number)
    case .activity(.exit):
      close(at: start) { !$0.isRun && $0.depth == depth }
    case .returned(let result) where open.contains { $0.isRun && $0.depth == depth }:
      // The run's slice ends here and shows the result.
      close(at: start, result: result) { $0.depth >= depth }
      shown = false
    default:
      break
    }
    for index in open.indices { open[index].latestEnd = max(open[index].latestEnd, end) }
    guard shown, let slice = slice(for: event, start: start) else { return }
    let node = append(slice, depth: depth)
    if slice.phase == .complete { adopt(into: node) }
  }

  /// Ends what is still open where its contents end (a trace that stopped mid-run).
  mutating func finish() {
    close { _ in true }
  }

  /// The slices and instants, in the order viewers read them.
  var output: [ChromeTraceEvent] { ChromeTraceEvent.inTraceOrder(nodes) }

  /// Virtual time: gives every slice and instant of the track a time of its own, 1 ns after
  /// the one before at least, in tree order: a parent starts before its children, a child
  /// ends before its parent ends, a slice ends before its next sibling starts. Perfetto ends
  /// a slice at the first event at or after its end, so at one virtual instant (a wake's
  /// timers and the next pass, a block and the run nested in it) nothing would nest.
  mutating func spreadInstants() {
    var cursor = Int64.min
    let ordered = roots.enumerated().sorted {
      (nodes[$0.element].start, $0.offset) < (nodes[$1.element].start, $1.offset)
    }
    for (_, root) in ordered { spread(root, cursor: &cursor) }
  }

  private mutating func spread(_ node: Int, cursor: inout Int64) {
    func tick(_ time: Int64) -> Int64 {
      cursor = cursor == .min ? time : max(cursor.clampedAdding(1), time)
      return cursor
    }
    let (start, end) = (nodes[node].start, nodes[node].end)
    nodes[node].start = tick(start)
    guard nodes[node].phase == .complete else { return }
    for child in children[node] { spread(child, cursor: &cursor) }
    nodes[node].duration = tick(end).clampedSubtracting(nodes[node].start)
  }

  private mutating func append(_ event: ChromeTraceEvent, depth: Int) -> Int {
    let node = nodes.count
    nodes.append(event)
    children.append([])
    depths.append(depth)
    if let parent = open.last?.node { children[parent].append(node) } else { roots.append(node) }
    return node
  }

  /// A callout recorded after the runs nested in it: takes them from its parent. They are
  /// its parent's last children, deeper than the callout and inside its time.
  private mutating func adopt(into callout: Int) {
    if let parent = open.last?.node {
      children[callout] = takeNested(in: callout, from: &children[parent])
    } else {
      children[callout] = takeNested(in: callout, from: &roots)
    }
  }

  /// Removes from `siblings` (whose last is `callout`) the nodes just before it that it holds.
  private func takeNested(in callout: Int, from siblings: inout [Int]) -> [Int] {
    let (depth, start, end) = (depths[callout], nodes[callout].start, nodes[callout].end)
    let last = siblings.count - 1
    var first = last
    while first > 0 {
      let node = siblings[first - 1]
      guard depths[node] > depth, nodes[node].start >= start, nodes[node].end <= end else { break }
      first -= 1
    }
    guard first < last else { return [] }
    let nested = Array(siblings[first..<last])
    siblings.removeSubrange(first..<last)
    return nested
  }

  private mutating func openSlice(
    isRun: Bool, depth: Int, mode: Loop.Mode, start: Int64, passes: Int
  ) {
    // A placeholder until `close` knows the end.
    let placeholder = ChromeTraceEvent(
      name: "", phase: .complete, start: start, pid: pid, tid: tid)
    let node = append(placeholder, depth: depth)
    open.append(
      OpenSlice(
        node: node, isRun: isRun, depth: depth, mode: mode, start: start, latestEnd: start,
        passes: passes))
  }

  /// Closes the open slices that match, innermost first, at `end` or where their contents
  /// ended; a run's slice gets `result` when it has one.
  private mutating func close(
    at end: Int64? = nil, result: Loop.RunResult? = nil, _ matches: (OpenSlice) -> Bool
  ) {
    while let last = open.last, matches(last) {
      open.removeLast()
      let stop = max(last.start, end ?? last.latestEnd)
      var args = [("mode", ChromeTraceEvent.Value.string(last.mode.name))]
      args.append(("depth", .integer(last.depth)))
      if !last.isRun { args.append(("pass", .integer(last.passes))) }
      if last.isRun, let result { args.append(("result", .string("\(result)"))) }
      nodes[last.node] = ChromeTraceEvent(
        name: last.isRun ? "run(in: \(last.mode))" : "pass",
        category: last.isRun ? "run" : "pass", phase: .complete, start: last.start,
        duration: stop.clampedSubtracting(last.start), pid: pid, tid: tid, args: args,
        level: level(depth: last.depth, offset: last.isRun ? 0 : 1))
      if let index = open.indices.last { open[index].latestEnd = max(open[index].latestEnd, stop) }
    }
  }

  /// Runs, then passes, then callouts: the order of slices that start and end together.
  private func level(depth: Int, offset: Int) -> Int { max(0, depth) * 3 + offset }

  /// The trace event of a recorded event: a slice for what took time, an instant otherwise.
  private func slice(for event: LoopTracer.Event, start: Int64) -> ChromeTraceEvent? {
    var args: [(String, ChromeTraceEvent.Value)] = [
      ("mode", .string(event.mode.name)), ("depth", .integer(event.depth)),
    ]
    let name: String
    let category: String
    switch event.kind {
    case .activity(let activity):
      name = "\(activity)"
      category = "activity"
    case .returned(let result):
      // A run not seen to begin (an empty mode's, or one under way at the attach).
      name = "returned .\(result)"
      category = "run"
    case .blocks(let count):
      name = "blocks"
      category = "blocks"
      args.append(("count", .integer(count)))
    case .manualSource(let label):
      name = label
      category = "source"
    case .timer(let label, let lateness):
      name = label
      category = "timer"
      args.append(("lateness_us", .microseconds(lateness.saturatedNanoseconds)))
    case .descriptor(let label, let fd, let events):
      name = label
      category = "descriptor"
      args += [("fd", .integer(Int(fd))), ("events", .string("\(events)"))]
    case .port(let label):
      name = label
      category = "port"
    case .mainQueue:
      name = "main queue"
      category = "mainQueue"
    case .slept(let causes):
      name = "sleep"
      category = "wait"
      args.append(("wokenBy", .string(causes.map(\.description).joined(separator: " + "))))
    case .spun(let causes):
      name = "spin"
      category = "wait"
      let found = causes.map(\.description).joined(separator: " + ")
      args.append(("found", .string(found.isEmpty ? "nothing" : found)))
    case .observer(let activity, let order):
      name = "observer: \(activity)"
      category = "observer"
      args += [("activity", .string("\(activity)")), ("order", .integer(order))]
    case .signalSent, .wakeUpSent:
      return nil  // on the sender's track: see `ChromeTraceDocument`
    }
    let isInstant: Bool
    switch event.kind {
    case .activity, .returned: isInstant = true
    default: isInstant = false
    }
    return ChromeTraceEvent(
      name: name, category: category, phase: isInstant ? .instant : .complete, start: start,
      duration: isInstant ? 0 : max(0, event.duration.saturatedNanoseconds), pid: pid, tid: tid,
      args: args, level: level(depth: event.depth, offset: 2))
  }
}
