import Glibc

/// Lays snapshots out as one Chrome trace: which process and track each event goes on, where
/// time zero is, and the file's text.
///
/// Real and virtual time share no time line. Events on CLOCK_MONOTONIC go in this process
/// (`getpid()`), a track per kernel thread, zero at the earliest of their origins. Events on
/// `VirtualLoop` clocks go in a process of their own whose ids no Linux process or thread can
/// have (`virtualPID` and up): a track per virtual loop — two loops of one thread are two
/// tracks — and one per thread that sent to one, zero at the earliest virtual origin. Nothing
/// there comes from the real process, so a virtual scenario writes the same bytes every time.
struct ChromeTraceDocument {
  /// PID_MAX_LIMIT: every Linux process and thread id is below it.
  static let virtualPID: pid_t = 1 << 22

  /// A track: a loop's (its clock and thread) or, in virtual time, a sender's.
  private struct TrackKey: Hashable {
    /// `Event.clockID`; for the track of a thread that sent to virtual loops, `.max`.
    var clockID: UInt64
    var thread: pid_t

    var isVirtual: Bool { clockID != 0 }
  }

  private struct Track {
    var pid: pid_t
    var tid: pid_t
    var name: String
    var slicer: ChromeTraceSlicer?
    var instants: [ChromeTraceEvent] = []
  }

  private let snapshots: [LoopTracer.Snapshot]
  private var keys: [TrackKey] = []
  private var tracks: [TrackKey: Track] = [:]
  private var zero: (real: Int64?, virtual: Int64?) = (nil, nil)

  /// The document for `snapshots`, the real process named `processName`.
  static func json(of snapshots: [LoopTracer.Snapshot], processName: String) -> String {
    var document = ChromeTraceDocument(snapshots: snapshots)
    return document.render(processName: processName)
  }

  private init(snapshots: [LoopTracer.Snapshot]) {
    self.snapshots = snapshots
    findZeros()
    makeTracks()
  }

  /// The instant `event` of `snapshot` starts at, in nanoseconds on its own clock.
  private static func instant(_ event: LoopTracer.Event, in snapshot: LoopTracer.Snapshot) -> Int64
  {
    snapshot.origin.nanoseconds.clampedAdding(event.start.saturatedNanoseconds)
  }

  private static func key(of event: LoopTracer.Event) -> TrackKey {
    // A real thread's loop and what it sent share its track; in virtual time they do not.
    let clock = event.isSent && event.clockID != 0 ? UInt64.max : event.clockID
    return TrackKey(clockID: clock, thread: event.threadID)
  }

  /// Each time line's zero: the earliest origin of the snapshots wholly on it (the moment a
  /// tracer was made, say), or an earlier event.
  private mutating func findZeros() {
    func lower(_ value: Int64, virtual: Bool) {
      if virtual { zero.virtual = min(zero.virtual ?? value, value) }
      if !virtual { zero.real = min(zero.real ?? value, value) }
    }
    for snapshot in snapshots {
      let clocks = Set(snapshot.events.map { $0.clockID != 0 })
      if clocks.count == 1, let virtual = clocks.first {
        lower(snapshot.origin.nanoseconds, virtual: virtual)
      }
      for event in snapshot.events {
        lower(Self.instant(event, in: snapshot), virtual: event.clockID != 0)
      }
    }
  }

  /// Real tracks first, loops before threads that only sent; virtual ones numbered in order.
  private mutating func makeTracks() {
    var loops: [TrackKey] = []
    var senders: [TrackKey] = []
    for snapshot in snapshots {
      for event in snapshot.events {
        let key = Self.key(of: event)
        if event.isSent {
          if !senders.contains(key) { senders.append(key) }
        } else if !loops.contains(key) {
          loops.append(key)
        }
      }
    }
    let ordered = loops + senders.filter { !loops.contains($0) }
    keys = ordered.filter { !$0.isVirtual } + ordered.filter(\.isVirtual)
    var virtualLoops = 0
    for (index, key) in keys.enumerated() {
      let isLoop = loops.contains(key)
      var name = name(of: key.thread, preferringLoops: isLoop)
      if key.isVirtual && isLoop {
        virtualLoops += 1
        name = virtualLoops == 1 ? "VirtualLoop" : "VirtualLoop (loop \(virtualLoops))"
      }
      let pid = key.isVirtual ? Self.virtualPID : getpid()
      let tid = key.isVirtual ? Self.virtualPID + pid_t(index + 1 - firstVirtualIndex) : key.thread
      tracks[key] = Track(
        pid: pid, tid: tid, name: name,
        slicer: isLoop ? ChromeTraceSlicer(pid: pid, tid: tid) : nil)
    }
  }

  private var firstVirtualIndex: Int { keys.firstIndex(where: \.isVirtual) ?? keys.count }

  /// A thread's recorded name: where it ran a loop if it did, else wherever it is known.
  private func name(of thread: pid_t, preferringLoops: Bool) -> String {
    let owner = snapshots.first {
      $0.threadNames[thread] != nil
        && (!preferringLoops || $0.events.contains { !$0.isSent && $0.threadID == thread })
    }
    return (owner ?? snapshots.first { $0.threadNames[thread] != nil })?.threadNames[thread]
      ?? "thread \(thread)"
  }

  private mutating func render(processName: String) -> String {
    var modes: [String] = []
    for snapshot in snapshots {
      var used: [TrackKey] = []
      for event in snapshot.events {
        let key = Self.key(of: event)
        let time = Self.instant(event, in: snapshot).clampedSubtracting(
          (event.clockID != 0 ? zero.virtual : zero.real) ?? 0)
        if event.isSent {
          let loop = loopName(for: event, in: snapshot)
          let instant = sentInstant(event, at: time, on: key, to: loop)
          tracks[key]?.instants.append(instant)
          continue
        }
        if !modes.contains(event.mode.name) { modes.append(event.mode.name) }
        if !used.contains(key) { used.append(key) }
        tracks[key]?.slicer?.add(event, at: time)
      }
      // Each snapshot is a record of its own: what it left open ends with it.
      for key in used { tracks[key]?.slicer?.finish() }
    }
    var entries: [ChromeTraceEvent] = []
    for key in keys {
      guard var track = tracks[key] else { continue }
      if key.isVirtual { track.slicer?.spreadInstants() }
      entries += (track.slicer?.output ?? []) + track.instants
    }
    var lines = metadata(processName: processName)
    lines += ChromeTraceEvent.inTraceOrder(entries).map(\.json)
    let otherData = otherData(modes: modes).map {
      JSONText.quoted($0.0) + ":" + JSONText.value($0.1)
    }
    return "{\"displayTimeUnit\":\"ms\",\n\"otherData\":{" + otherData.joined(separator: ",")
      + "},\n\"traceEvents\":[\n" + lines.joined(separator: ",\n") + "\n]}\n"
  }

  /// The name of the track of the loop `event` was sent to, when the snapshot tells which.
  private func loopName(for event: LoopTracer.Event, in snapshot: LoopTracer.Snapshot) -> String? {
    var loops: Set<TrackKey> = []
    for other in snapshot.events where !other.isSent && other.clockID == event.clockID {
      loops.insert(Self.key(of: other))
    }
    guard loops.count == 1, let loop = loops.first else { return nil }
    return tracks[loop]?.name
  }

  /// Names for the processes and tracks, and the tracks' order.
  private func metadata(processName: String) -> [String] {
    var lines: [String] = []
    let hasVirtual = keys.contains(where: \.isVirtual)
    if !hasVirtual || keys.contains(where: { !$0.isVirtual }) {
      lines.append(Self.metadata("process_name", pid: getpid(), tid: getpid(), processName))
    }
    if hasVirtual {
      lines.append(
        Self.metadata(
          "process_name", pid: Self.virtualPID, tid: Self.virtualPID,
          processName + " (virtual time)"))
    }
    var sortIndex: [pid_t: Int] = [:]
    for key in keys {
      guard let track = tracks[key] else { continue }
      let index = sortIndex[track.pid, default: 0]
      sortIndex[track.pid] = index + 1
      lines.append(Self.metadata("thread_name", pid: track.pid, tid: track.tid, track.name))
      lines.append(
        ChromeTraceEvent(
          name: "thread_sort_index", phase: .metadata, start: 0, pid: track.pid, tid: track.tid,
          args: [("sort_index", .integer(index))]
        ).json)
    }
    return lines
  }

  private static func metadata(_ name: String, pid: pid_t, tid: pid_t, _ value: String) -> String {
    ChromeTraceEvent(
      name: name, phase: .metadata, start: 0, pid: pid, tid: tid, args: [("name", .string(value))]
    ).json
  }

  private func otherData(modes: [String]) -> [(String, ChromeTraceEvent.Value)] {
    let (real, virtual) = (keys.contains { !$0.isVirtual }, keys.contains(where: \.isVirtual))
    var clock = "CLOCK_MONOTONIC"
    if virtual {
      clock =
        real ? "CLOCK_MONOTONIC (pid \(getpid())), virtual (pid \(Self.virtualPID))" : "virtual"
    }
    var data: [(String, ChromeTraceEvent.Value)] = [
      ("generator", .string("RunLoopKit LoopTracer")), ("clock", .string(clock)),
    ]
    if virtual {
      data.append(("virtualTime", .string("events at one instant are spread 1 ns apart")))
    }
    data.append(("modes", .string(modes.joined(separator: ", "))))
    data.append(("dropped", .integer(snapshots.map(\.dropped).reduce(0, +))))
    return data
  }

  /// A signal or wake-up another thread sent, as an instant on that thread's track.
  private func sentInstant(
    _ event: LoopTracer.Event, at time: Int64, on key: TrackKey, to loop: String?
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
    let track = tracks[key]
    return ChromeTraceEvent(
      name: name, category: name, phase: .instant, start: time, pid: track?.pid ?? getpid(),
      tid: track?.tid ?? event.threadID, args: args)
  }
}
