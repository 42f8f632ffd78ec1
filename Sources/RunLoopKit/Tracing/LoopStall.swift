extension Loop {
  /// A callout of a loop that has run longer than a stall watch's threshold, or the end of
  /// one that was reported (`Loop.watchStalls(longerThan:_:)`).
  ///
  /// No CFRunLoop counterpart: on Darwin, hang detectors (Sentry, KSCrash, Bugsnag) infer a
  /// stuck main loop from observer callbacks that stop coming. Here the loop publishes which
  /// callout it is in, so the report names it while it still runs.
  public struct Stall: Sendable, Equatable, CustomStringConvertible {
    /// What kind of callout ran.
    public enum Kind: Sendable, Equatable {
      /// A block queued with `perform`.
      case block
      /// An executor job (a task's code on the loop).
      case job
      /// A timer's handler (delayed blocks and `loop.sleep` among them).
      case timer
      /// A manual source's perform (`performAsSource` blocks among them).
      case manualSource
      /// A descriptor source's handler (signal and child-process sources among them).
      case descriptor(fd: Int32)
      /// A port's handler.
      case port
      /// `Loop.main` serving the main dispatch queue (`DispatchQueue.main`, `@MainActor`).
      case mainQueue
      /// An observer told of `activity`.
      case observer(Loop.Activity)
    }

    /// What ran.
    public let kind: Kind
    /// The item's own label (a timer's, a source's, a port's); nil when it has none, and for
    /// blocks, jobs, observers and the main queue.
    public let label: String?
    /// The mode of the run it is a callout of.
    public let mode: Loop.Mode
    /// How many runs of the loop were active when it began: 1 for a callout of the outermost
    /// run, 2 for one of a run nested in a callout, and so on.
    public let depth: Int
    /// While `hasEnded` is false, how long it has been running so far; once true, how long
    /// it ran in all.
    public let duration: Duration
    /// False in the report made while the callout still runs; true in the one made when it
    /// returns.
    public let hasEnded: Bool
    /// Tells this loop's callouts apart: the end of a callout is reported with the number
    /// its stall was reported with.
    public let callout: UInt64

    /// For example `timer "heartbeat" in default (depth 1): running for 200 ms`.
    public var description: String {
      let what =
        switch kind {
        case .block: "block"
        case .job: "executor job"
        case .timer: "timer"
        case .manualSource: "manual source"
        case .descriptor(let fd): "descriptor source on fd \(fd)"
        case .port: "port"
        case .mainQueue: "main queue"
        case .observer(let activity): "observer of \(activity)"
        }
      let named = label.map { "\(what) \"\($0)\"" } ?? what
      let time = LoopTracer.format(duration)
      let state = hasEnded ? "ended after \(time)" : "running for \(time)"
      return "\(named) in \(mode) (depth \(depth)): \(state)"
    }
  }
}
