import Glibc

/// The loop's side of `LoopTracer`: each phase asks for a sink once, and records into it
/// only when a tracer is attached.
extension Loop {
  /// Where one phase records what it does, stamped with the mode and nesting depth.
  struct TraceSink {
    let tracer: LoopTracer
    /// Which attach of the tracer this is; events from an older one are dropped.
    let token: UInt64
    let mode: Mode
    let depth: Int
    /// The loop's virtual clock, if it has one: events are stamped on the loop's clock.
    let clock: VirtualClock?

    /// When a callout starts; pass it to `record(_:since:)` once the callout returns.
    var now: LoopClock.Instant { clock?.now ?? .now }

    /// Records something that began at `start` (nil: an instant) and ends now.
    func record(_ kind: LoopTracer.Kind, since start: LoopClock.Instant? = nil) {
      let end = now
      record(kind, from: start ?? end, to: end)
    }

    func record(_ kind: LoopTracer.Kind, from start: LoopClock.Instant, to end: LoopClock.Instant) {
      tracer.record(kind, from: start, to: end, depth: depth, mode: mode, token: token)
    }
  }

  /// The sink for a phase of a run in `mode`, or nil when no tracer is attached — then this
  /// relaxed load is all tracing costs. Never call it with the lock held; never record with
  /// the lock held either (`LoopTracer.attach` takes its own lock, then this one).
  @inline(__always)
  func traceSink(_ mode: Mode, runsBelow extraDepth: Int = 0) -> TraceSink? {
    guard tracing.load(ordering: .relaxed) else { return nil }
    return attachedTraceSink(mode, runsBelow: extraDepth)
  }

  /// The sink for `mode` (nil: the mode the loop is running now, `.default` when it is not
  /// running), with the lock taken here: never call it with the lock held.
  func attachedTraceSink(_ mode: Mode?, runsBelow extraDepth: Int = 0) -> TraceSink? {
    lock.withLock {
      tracer.map {
        TraceSink(
          tracer: $0, token: tracerToken, mode: mode ?? frames.last?.mode ?? .default,
          depth: frames.count + extraDepth, clock: virtualClock)
      }
    }
  }

  func installTracer(_ newTracer: LoopTracer, token: UInt64) throws(LoopError) {
    try lock.withLock { () throws(LoopError) in
      guard !tornDown else { throw .loopTornDown(thread: threadDescription) }
      if let tracer, tracer !== newTracer {
        throw .invalidArgument(
          name: "LoopTracer.attach(to:)", value: "loop of \(threadDescription)",
          reason: "this loop already has a tracer; detach that one first")
      }
      tracer = newTracer
      tracerToken = token
      tracing.store(true, ordering: .relaxed)
    }
  }

  /// What a Chrome trace calls the loop's track: `main` for the main thread's loop, else the
  /// thread's name when the loop was made (a resident thread names itself first). A
  /// `VirtualLoop`'s track is named by the export.
  var traceTrackName: String { Self.trackName(thread: threadID, named: threadName) }

  /// A thread's track name: `main` for the process's main thread, else `name`, else its id.
  static func trackName(thread: pid_t, named name: @autoclosure () -> String?) -> String {
    thread == getpid() ? "main" : name() ?? "thread \(thread)"
  }

  /// True once the loop's thread has exited and the loop was torn down.
  var hasExited: Bool { lock.withLock { tornDown } }

  func removeTracer(_ oldTracer: LoopTracer) {
    lock.withLock {
      guard tracer === oldTracer else { return }
      tracer = nil
      tracing.store(false, ordering: .relaxed)
    }
  }
}

extension ManualSource {
  var traceName: String { label ?? "manual source" }
}

extension LoopTimer {
  var traceName: String {
    label ?? interval.map { "timer every \(LoopTracer.format($0))" } ?? "one-shot timer"
  }
}

extension DescriptorSource {
  /// Ports are descriptor sources on the port's eventfd, told apart by their teardown hook.
  var isPort: Bool { onTeardown != nil }

  var traceName: String { label ?? (isPort ? "port" : "fd \(fileDescriptor)") }

  /// What the trace says when this source's descriptor ended a wait.
  var wakeCause: LoopTracer.WakeCause {
    if isMainQueue { return .mainQueue }
    return isPort ? .port(traceName) : .descriptor(traceName, fd: fileDescriptor)
  }

  /// What the trace says when this source's handler ran with `events`.
  func traceKind(_ events: Events) -> LoopTracer.Kind {
    if isMainQueue { return .mainQueue }
    return isPort ? .port(traceName) : .descriptor(traceName, fd: fileDescriptor, events: events)
  }
}
