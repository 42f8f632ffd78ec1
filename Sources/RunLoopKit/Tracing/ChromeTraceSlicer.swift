import Glibc

/// Turns the events one loop recorded on its thread into that thread's Chrome trace events:
/// each callout, sleep and spin a slice of its own, activities and stray returns instants,
/// and around them the slices the tracer does not record but its activities mark — a run
/// (entry to return) and each pass (beforeTimers to the next beforeTimers, or to exit).
///
/// Events come in start order. A slice is still open when an event starts at its depth or
/// deeper; an event that starts at a shallower depth means the deeper runs are over (the
/// loop was back out of them when it began), which also closes runs a detach cut short.
struct ChromeTraceSlicer {
  let pid: pid_t
  let tid: pid_t
  /// Nanoseconds from the trace's time zero to the events' origin.
  let offset: Int64
  private(set) var output: [ChromeTraceEvent] = []
  /// The runs and passes under way, outermost first.
  private var open: [OpenSlice] = []

  private struct OpenSlice {
    var isRun: Bool
    var depth: Int
    var mode: Loop.Mode
    var start: Int64
    /// The latest end of anything inside so far: where a slice cut short ends.
    var latestEnd: Int64
    /// A run: the passes begun so far. A pass: its number in its run.
    var passes = 0
  }

  init(pid: pid_t, tid: pid_t, offset: Int64) {
    self.pid = pid
    self.tid = tid
    self.offset = offset
  }

  mutating func add(_ event: LoopTracer.Event) {
    let start = offset + event.start.saturatedNanoseconds
    let end = start + event.duration.saturatedNanoseconds
    let depth = event.depth
    close { $0.depth > depth }
    var shown = true
    switch event.kind {
    case .activity(.entry):
      close { $0.depth >= depth }
      open.append(
        OpenSlice(isRun: true, depth: depth, mode: event.mode, start: start, latestEnd: end))
    case .activity(.beforeTimers):
      close(at: start) { !$0.isRun && $0.depth == depth }
      var number = 1
      if let run = open.lastIndex(where: { $0.isRun && $0.depth == depth }) {
        open[run].passes += 1
        number = open[run].passes
      }
      open.append(
        OpenSlice(
          isRun: false, depth: depth, mode: event.mode, start: start, latestEnd: end,
          passes: number))
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
    if shown, let slice = slice(for: event, start: start) { output.append(slice) }
  }

  /// Ends what is still open where its contents end (a trace that stopped mid-run).
  mutating func finish() {
    close { _ in true }
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
      output.append(
        ChromeTraceEvent(
          name: last.isRun ? "run(in: \(last.mode))" : "pass",
          category: last.isRun ? "run" : "pass", phase: .complete, start: last.start,
          duration: stop - last.start, pid: pid, tid: tid, args: args,
          level: level(depth: last.depth, offset: last.isRun ? 0 : 1)))
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
      return nil  // on the sender's track: see `LoopTracer.sentInstant`
    }
    let isInstant: Bool
    switch event.kind {
    case .activity, .returned: isInstant = true
    default: isInstant = false
    }
    return ChromeTraceEvent(
      name: name, category: category, phase: isInstant ? .instant : .complete, start: start,
      duration: isInstant ? 0 : event.duration.saturatedNanoseconds, pid: pid, tid: tid,
      args: args, level: level(depth: event.depth, offset: 2))
  }
}
