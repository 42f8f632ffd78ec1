extension Loop {
  /// Why a `run(in:…)` call returned. Mirrors `CFRunLoopRunResult`, with the same raw values.
  public enum RunResult: Int, Sendable, CustomStringConvertible {
    /// The mode had (or was left with) no sources, timers or blocks to keep it running.
    case finished = 1
    /// `stop()` ended this run.
    case stopped = 2
    /// The deadline passed.
    case timedOut = 3
    /// A source was handled and the run was asked to return after one.
    case handledSource = 4

    /// The case's name, such as `timedOut`.
    public var description: String {
      switch self {
      case .finished: "finished"
      case .stopped: "stopped"
      case .timedOut: "timedOut"
      case .handledSource: "handledSource"
      }
    }
  }
}
