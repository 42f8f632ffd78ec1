extension VirtualLoop {
  /// What one `step()` did: every event of the pass as a `LoopTracer` records it, on the
  /// virtual clock, and the answers a learner asks of a pass — which activities an observer
  /// was told of, which callouts ran, and what ended the wait.
  ///
  /// A step is a run of one pass, so it begins with `entry` and ends with `exit`; when its wait
  /// would sleep, the clock moves to the mode's next timer and the wait is a `slept` event.
  public struct Pass: Sendable, CustomStringConvertible {
    /// The mode the pass ran in.
    public let mode: Loop.Mode
    /// What the run of one pass returned: `.timedOut` unless the pass emptied the mode
    /// (`.finished`) or a callout stopped it (`.stopped`).
    public let result: Loop.RunResult
    /// The clock when the pass began.
    public let start: LoopClock.Instant
    /// The clock when the pass ended: later than `start` when its wait moved the clock.
    public let end: LoopClock.Instant
    /// Everything the tracer recorded during the pass, in the order recorded: the pass's own
    /// events, those of runs nested in its callouts (deeper `depth`), and the signals and
    /// wake-ups other threads sent the loop meanwhile (`signalSent`, `wakeUpSent`, with the
    /// sender's `threadID`), which explain what the pass found. `activities`, `callouts` and
    /// `wokenBy` read the pass's own events only.
    public let events: [LoopTracer.Event]

    /// The activities the pass went through, in order (an observer of `.all` is told each).
    public var activities: [Loop.Activity] {
      ownEvents.compactMap { if case .activity(let activity) = $0.kind { activity } else { nil } }
    }

    /// The callouts the pass made, in order: block batches, manual sources, timers,
    /// descriptor sources and ports (observers are told of `activities`).
    public var callouts: [LoopTracer.Kind] {
      ownEvents.map(\.kind).filter {
        switch $0 {
        case .activity, .slept, .spun, .returned, .observer: false
        default: true
        }
      }
    }

    /// What ended the pass's wait, or nil when the pass only looked (it had work in hand,
    /// or nothing lay ahead). `[.deadline]` for a wait that ran to the step's end.
    public var wokenBy: [LoopTracer.WakeCause]? {
      for event in ownEvents { if case .slept(let causes) = event.kind { return causes } }
      return nil
    }

    /// How far the clock moved during the pass.
    public var slept: Duration { start.duration(to: end) }

    /// Where the virtual clock began, for the times in `description`.
    let origin: LoopClock.Instant

    /// A header line, then the pass as `LoopTracer.timeline(of:)` renders it (times in
    /// milliseconds since the clock began).
    public var description: String {
      "pass in \"\(mode)\" from \(Pass.milliseconds(origin.duration(to: start))) to "
        + "\(Pass.milliseconds(origin.duration(to: end))) ms, returned .\(result)\n"
        + LoopTracer.timeline(of: events)
    }

    /// "100.000": milliseconds with three decimals, as the timeline's time column.
    static func milliseconds(_ duration: Duration) -> String {
      LoopTracer.fixed(duration.saturatedNanoseconds / 1_000, unit: 1_000, decimals: 3)
    }

    /// The events of the step's own run, not of runs nested in its callouts, nor what other
    /// threads sent the loop meanwhile.
    private var ownEvents: [LoopTracer.Event] {
      let loopEvents = events.filter { !$0.isSent }
      let top = loopEvents.map(\.depth).min() ?? 0
      return loopEvents.filter { $0.depth == top }
    }
  }
}
