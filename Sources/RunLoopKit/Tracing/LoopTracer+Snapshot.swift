import Glibc

extension LoopTracer {
  /// What a tracer held at one moment, with what it takes to put it on a time line shared
  /// with other tracers: the instant its events count from and the names of the threads they
  /// happened on. `chromeTraceJSON(snapshots:)` renders any number of them as one file;
  /// `events` may be filtered first.
  ///
  /// Mirrors no CFRunLoop type: CF has no tracer, and on Apple platforms the record is an
  /// Instruments trace of the run loop's kdebug points, kept by the system, not by the
  /// program. Unlike one, a snapshot is a value the program holds, filters and merges.
  public struct Snapshot: Sendable, Equatable {
    /// Time zero of every event's `start`: the tracer's `origin`.
    public var origin: LoopClock.Instant
    /// The events, in the order recorded (a callout after the runs nested in it), which the
    /// export's nesting relies on.
    public var events: [Event]
    /// A name for each thread (by kernel id) that events happened on: `main` or the loop
    /// thread's name, a thread that signalled or woke the loop by its own name. A thread
    /// missing here is called `thread N`. A `VirtualLoop`'s track is named by the export.
    public var threadNames: [pid_t: String]
    /// How many earlier events the tracer dropped because it was full.
    public var dropped: Int

    /// A snapshot of events that count from `origin` (a tracer's, to line them up with its
    /// other events), such as a filtered copy of a tracer's `snapshot()`.
    public init(
      origin: LoopClock.Instant, events: [Event], threadNames: [pid_t: String] = [:],
      dropped: Int = 0
    ) {
      self.origin = origin
      self.events = events
      self.threadNames = threadNames
      self.dropped = dropped
    }
  }
}
