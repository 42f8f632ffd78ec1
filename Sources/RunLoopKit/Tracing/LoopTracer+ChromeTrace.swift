/// The trace as a Chrome Trace Event Format file (its JSON object form), which Perfetto
/// (ui.perfetto.dev) and chrome://tracing open.
///
/// CFRunLoop has no tracer to export; on Apple platforms the same picture is an Instruments
/// trace of the run loop's kdebug points. Here every loop thread is a track of its own: each
/// run, each pass, each sleep or spin (with what woke it) and each callout — blocks, manual
/// sources, timers (with their lateness), descriptors, ports, the main queue, observers — is
/// a slice on it, nested runs inside the callout that ran them. Activities are instants on
/// the loop's track; signals and wake-ups sent from other threads are instants on the
/// sender's track. Metadata names the processes and each track, and `otherData` lists the
/// modes seen. Times are microseconds with three decimals (exact nanoseconds).
///
/// Real and virtual time are kept apart. Loops on CLOCK_MONOTONIC are in this process, a
/// track per thread, on one time line counted from the earliest origin of the tracers
/// exported together, so several loops line up. `VirtualLoop`s are in a process of their own
/// named "… (virtual time)", with ids no real process or thread has and a time line of their
/// own: a track per virtual loop (two made on one thread get two), so the same scenario
/// writes the same bytes in any process. In virtual time, events at one instant are spread
/// 1 ns apart so viewers can nest them: Perfetto ends a slice at the first event at or after
/// its end, so a slice lasting no time holds nothing, and a pass ending at the instant the
/// next begins would take in that one's callouts.
extension LoopTracer {
  /// The recorded events as a Chrome Trace Event Format document: open it in Perfetto or
  /// chrome://tracing. `processName` names the process's group of tracks.
  public func chromeTraceJSON(processName: String = "RunLoopKit") -> String {
    LoopTracer.chromeTraceJSON(snapshots: [snapshot()], processName: processName)
  }

  /// Several tracers (one per loop, say) as one document, on one time line, a track per
  /// thread (per virtual loop in virtual time).
  public static func chromeTraceJSON(
    of tracers: [LoopTracer], processName: String = "RunLoopKit"
  ) -> String {
    chromeTraceJSON(snapshots: tracers.map { $0.snapshot() }, processName: processName)
  }

  /// Snapshots (of several tracers, or filtered) as one document, on one time line, a track
  /// per thread (per virtual loop in virtual time). Snapshots of one loop share its track.
  public static func chromeTraceJSON(
    snapshots: [Snapshot], processName: String = "RunLoopKit"
  ) -> String {
    ChromeTraceDocument.json(of: snapshots, processName: processName)
  }
}
