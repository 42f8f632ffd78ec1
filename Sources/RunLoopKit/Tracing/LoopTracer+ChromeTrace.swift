import Glibc

/// The trace as a Chrome Trace Event Format file (its JSON object form), which Perfetto
/// (ui.perfetto.dev) and chrome://tracing open.
///
/// CFRunLoop has no tracer to export; on Apple platforms the same picture is an Instruments
/// trace of the run loop's kdebug points. Here every loop thread is a track of its own: each
/// run, each pass, each sleep or spin (with what woke it) and each callout — blocks, manual
/// sources, timers (with their lateness), descriptors, ports, the main queue, observers — is
/// a slice on it, nested runs inside the callout that ran them. Activities are instants on
/// the loop's track; signals and wake-ups sent from other threads are instants on the
/// sender's track. Metadata names the process and each thread, and `otherData` lists the
/// modes seen. Times are microseconds since the earliest origin of the tracers exported
/// together, so several loops line up on one time line.
extension LoopTracer {
  /// The recorded events as a Chrome Trace Event Format document: open it in Perfetto or
  /// chrome://tracing. `processName` names the process's group of tracks.
  public func chromeTraceJSON(processName: String = "RunLoopKit") -> String {
    LoopTracer.chromeTraceJSON(of: [snapshot()], processName: processName)
  }

  /// Several tracers (one per loop, say) as one document, on one time line, a track per
  /// thread.
  public static func chromeTraceJSON(
    of tracers: [LoopTracer], processName: String = "RunLoopKit"
  ) -> String {
    chromeTraceJSON(of: tracers.map { $0.snapshot() }, processName: processName)
  }

  /// Snapshots (of several tracers, or filtered) as one document, on one time line, a track
  /// per thread.
  public static func chromeTraceJSON(
    of snapshots: [Snapshot], processName: String = "RunLoopKit"
  ) -> String {
    let pid = getpid()
    let zero = snapshots.map(\.origin.nanoseconds).min() ?? 0
    var entries: [ChromeTraceEvent] = []
    var loopThreads: [pid_t] = []
    var senders: [pid_t] = []
    var names: [pid_t: String] = [:]
    var modes: [String] = []
    for snapshot in snapshots {
      let offset = snapshot.origin.nanoseconds - zero
      var slicers: [pid_t: ChromeTraceSlicer] = [:]
      var order: [pid_t] = []
      // What a sent instant was sent to, when the snapshot is of one loop.
      let targets = Set(snapshot.events.lazy.filter { !$0.isSent }.map(\.thread))
      let target = targets.count == 1 ? targets.first.map { snapshot.name(of: $0) } : nil
      for event in inStartOrder(snapshot.events) {
        if event.isSent {
          entries.append(sentInstant(event, offset: offset, pid: pid, to: target))
          if !senders.contains(event.thread) { senders.append(event.thread) }
          continue
        }
        if !modes.contains(event.mode.name) { modes.append(event.mode.name) }
        if slicers[event.thread] == nil {
          slicers[event.thread] = ChromeTraceSlicer(pid: pid, tid: event.thread, offset: offset)
          order.append(event.thread)
        }
        slicers[event.thread]?.add(event)
      }
      for tid in order {
        guard var slicer = slicers[tid] else { continue }
        slicer.finish()
        entries += slicer.output
        if !loopThreads.contains(tid) { loopThreads.append(tid) }
        if names[tid] == nil { names[tid] = snapshot.name(of: tid) }
      }
    }
    // A loop thread keeps its loop's name; a thread that only sent gets its own.
    for snapshot in snapshots {
      for tid in senders where names[tid] == nil { names[tid] = snapshot.threadNames[tid] }
    }
    let tracks = loopThreads + senders.filter { !loopThreads.contains($0) }
    var lines = [metadata("process_name", pid: pid, tid: pid, .string(processName))]
    for (index, tid) in tracks.enumerated() {
      lines.append(
        metadata("thread_name", pid: pid, tid: tid, .string(names[tid] ?? "thread \(tid)")))
      lines.append(metadata("thread_sort_index", pid: pid, tid: tid, .integer(index)))
    }
    lines += ChromeTraceEvent.inTraceOrder(entries).map(\.json)
    let other: [(String, ChromeTraceEvent.Value)] = [
      ("generator", .string("RunLoopKit LoopTracer")),
      ("clock", .string("CLOCK_MONOTONIC, or a VirtualLoop's virtual clock")),
      ("modes", .string(modes.joined(separator: ", "))),
      ("dropped", .integer(snapshots.map(\.dropped).reduce(0, +))),
    ]
    let otherData = other.map { JSONText.quoted($0.0) + ":" + JSONText.value($0.1) }
    return "{\"displayTimeUnit\":\"ms\",\n\"otherData\":{" + otherData.joined(separator: ",")
      + "},\n\"traceEvents\":[\n" + lines.joined(separator: ",\n") + "\n]}\n"
  }

  /// A `process_name`, `thread_name` or `thread_sort_index` record.
  private static func metadata(
    _ name: String, pid: pid_t, tid: pid_t, _ value: ChromeTraceEvent.Value
  ) -> String {
    let key = name == "thread_sort_index" ? "sort_index" : "name"
    return ChromeTraceEvent(
      name: name, phase: .metadata, start: 0, pid: pid, tid: tid, args: [(key, value)]
    ).json
  }

  /// A signal or wake-up another thread sent, as an instant on that thread's track.
  private static func sentInstant(
    _ event: Event, offset: Int64, pid: pid_t, to loop: String?
  ) -> ChromeTraceEvent {
    var args: [(String, ChromeTraceEvent.Value)] = []
    let name: String
    switch event.kind {
    case .signalSent(let label):
      name = "signal"
      args.append(("source", .string(label)))
    case .wakeUpSent(let route):
      name = "wake-up"
      args.append(("via", .string(route.description)))
    default:
      name = event.summary
    }
    if let loop { args.append(("loop", .string(loop))) }
    args += [("loopMode", .string(event.mode.name)), ("loopDepth", .integer(event.depth))]
    return ChromeTraceEvent(
      name: name, category: name, phase: .instant,
      start: offset + event.start.saturatedNanoseconds, pid: pid, tid: event.thread, args: args)
  }
}

extension LoopTracer.Snapshot {
  /// The name of a thread's track: its recorded name, else `thread N`.
  fileprivate func name(of thread: pid_t) -> String {
    threadNames[thread] ?? "thread \(thread)"
  }
}
