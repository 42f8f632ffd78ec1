import Glibc

/// Records what one loop does, pass by pass, on the monotonic clock: every activity an
/// observer could see, plus what observers cannot — which block batch, source, port, timer,
/// descriptor or observer ran and for how long, how long the loop slept and what woke it, who
/// signalled or woke it from another thread, and why each run returned. `timeline()` renders
/// the record as aligned text, `svg()` as swim lanes, `chromeTraceJSON()` as a file Perfetto
/// opens.
///
/// CFRunLoop has no tracer; on Apple platforms the same picture comes from observers plus the
/// kdebug trace points Instruments reads. Here the hooks are in the loop itself.
///
/// Cost: a loop with no tracer attached pays one relaxed atomic load per phase, and so does a
/// `ManualSource.signal()` or a wake-up sent to it. An attached tracer costs two clock reads
/// and a lock per recorded event; what another thread sends costs that thread the loop's lock
/// and a `gettid` too. The record is a ring of `capacity` events: once full, the oldest events
/// are dropped and counted in `dropped`.
///
/// ```swift
/// let tracer = LoopTracer()
/// try tracer.attach(to: .current)
/// Loop.current.run(for: .milliseconds(100))
/// tracer.detach()
/// print(tracer.timeline())
/// ```
public final class LoopTracer: @unchecked Sendable {  // `state` is guarded by `lock`
  /// One thing the loop did.
  public struct Event: Sendable, Equatable {
    /// When it began, measured from the tracer's creation.
    public var start: Duration
    /// How long it lasted (a callout or a sleep); zero for an instant such as an activity.
    public var duration: Duration
    /// How many `run` calls were active: 1 in the outermost run, 2 in a run nested in it…
    public var depth: Int
    /// The mode the run was in.
    public var mode: Loop.Mode
    /// What happened.
    public var kind: Kind
    /// The kernel id (`gettid`) of the thread it happened on: the loop's thread (for a
    /// `VirtualLoop`, the thread that made it) or, for `signalSent` and `wakeUpSent`, the
    /// thread that sent them. A Chrome trace gives each thread a track of its own.
    public var thread: pid_t

    /// When it ended, measured from the tracer's creation.
    public var end: Duration { start + duration }
  }

  /// What happened.
  public enum Kind: Sendable, Equatable {
    /// A point an observer is told about: entry, beforeTimers, beforeSources, beforeWaiting,
    /// afterWaiting, exit. Recorded whether or not any observer is registered.
    case activity(Loop.Activity)
    /// A batch of `perform` blocks ran.
    case blocks(count: Int)
    /// A signalled manual source was performed.
    case manualSource(String)
    /// A timer fired, `lateness` after its fire date.
    case timer(String, lateness: Duration)
    /// A descriptor source's handler ran with what the descriptor reported.
    case descriptor(String, fd: Int32, events: DescriptorSource.Events)
    /// A port's handler took its messages.
    case port(String)
    /// `Loop.main` served the main dispatch queue: `DispatchQueue.main` blocks and
    /// `@MainActor` jobs ran.
    case mainQueue
    /// The loop blocked in the kernel (`epoll_wait`, or its futex when the mode watches no
    /// descriptor); the event's duration is how long it slept.
    case slept(wokenBy: [WakeCause])
    /// Under a spinning `Loop.WaitPolicy`, the loop polled instead of sleeping; the duration
    /// is how long it spun. No causes: the window ran out (a sleep follows, unless the
    /// deadline has passed).
    case spun(wokenBy: [WakeCause])
    /// A `run` call returned. A run of an empty mode returns `.finished` without any entry.
    case returned(Loop.RunResult)
    /// An observer was told of an activity (its `order` tells apart several told of the same
    /// one); the duration is its callout. Follows the activity's own event.
    case observer(Loop.Activity, order: Int)
    /// Another thread signalled one of the loop's manual sources (`ManualSource.signal()`);
    /// carries the source's label. An instant, recorded on the sending thread (`thread`),
    /// with the loop's mode and depth at the time (depth 0: the loop was not running).
    case signalSent(String)
    /// Another thread woke the sleeping loop: a post (`perform`, `ResidentThread.perform`)
    /// that found it asleep, `wakeUp()`, `stop()`, `signalAndWake()`. An instant on the
    /// sending thread, as `signalSent`. A wake-up of a busy loop is a flag its next wait
    /// reads, not a message, and is not recorded.
    case wakeUpSent(WakeUpRoute)
  }

  /// How a wake-up reached a sleeping loop. (`CFRunLoopWakeUp` sends a Mach message to the
  /// loop's wake-up port; a Linux loop has two ways in.)
  public enum WakeUpRoute: Sendable, Equatable, CustomStringConvertible {
    /// A write to the loop's eventfd, in the epoll set of the mode it sleeps in.
    case eventfd
    /// A wake of the futex the loop sleeps on when its mode watches no descriptor.
    case futex

    /// `eventfd write` or `futex wake`.
    public var description: String {
      switch self {
      case .eventfd: "eventfd write"
      case .futex: "futex wake"
      }
    }
  }

  /// What ended a sleep.
  public enum WakeCause: Sendable, Equatable, CustomStringConvertible {
    /// A `LoopPort` got a message; carries the port's label, or `port`.
    case port(String)
    /// A descriptor source became ready; carries its label (or `fd N`) and its descriptor.
    case descriptor(String, fd: Int32)
    /// The mode's timerfd: a timer is due.
    case timer
    /// The loop's wake-up eventfd: `wakeUp()`, `perform`, `stop()` or `signalAndWake()`.
    case wakeUp
    /// Nothing: the run's deadline passed.
    case deadline
    /// The main dispatch queue got work (`DispatchQueue.main`, a `@MainActor` job); only
    /// `Loop.main` watches it.
    case mainQueue
    /// A descriptor the loop no longer has a source for (its fd was closed while the file
    /// stayed open elsewhere); the loop rebuilds that mode's epoll set.
    case unregisteredDescriptor

    /// A short phrase for timelines, such as `timer`, `wake-up` or a port's label.
    public var description: String {
      switch self {
      case .port(let name): name == "port" ? name : "port \"\(name)\""
      case .descriptor(let name, let fd): name == "fd \(fd)" ? name : "\"\(name)\" (fd \(fd))"
      case .timer: "timer"
      case .wakeUp: "wake-up"
      case .deadline: "deadline"
      case .mainQueue: "main queue"
      case .unregisteredDescriptor: "an unregistered descriptor"
      }
    }
  }

  /// The most events kept; older ones are dropped first.
  public let capacity: Int
  /// Time zero of every event's `start`: when the tracer was made, or, while it follows a
  /// `VirtualLoop`'s loop, where that loop's virtual clock began (so two runs of the same
  /// scenario trace the same figures).
  public var origin: LoopClock.Instant { lock.withLock { state.origin } }
  /// When the tracer was made, on CLOCK_MONOTONIC.
  private let createdAt: LoopClock.Instant
  /// A pthread mutex, not `Mutex`, so ThreadSanitizer sees the synchronisation.
  private let lock = Lock()
  private var state: State

  private struct State {
    var origin: LoopClock.Instant
    var ring: [Event] = []
    /// Every event recorded since the tracer was made, dropped ones included.
    var recorded = 0
    /// Where the next event goes once the ring is full.
    var next = 0
    var dropped = 0
    weak var loop: Loop?
    /// When the current attach happened, measured from `origin`.
    var attachedAt: Duration = .zero
    /// Names the current attach (0: detached). A loop's phases carry the token they were
    /// given, so comparing it needs no look at the weak `loop` on every event.
    var token: UInt64 = 0
    var lastToken: UInt64 = 0
    /// The name of each thread events were recorded on, for a Chrome trace's tracks.
    var threadNames: [pid_t: String] = [:]
    /// The kernel id of the followed loop's thread: where its own events happen.
    var loopThread: pid_t = 0
  }

  /// - Parameter capacity: how many events to keep (at least 1); the oldest go first.
  public init(capacity: Int = 10_000) {
    self.capacity = max(1, capacity)
    let now = LoopClock.Instant.now
    self.createdAt = now
    self.state = State(origin: now)
  }

  /// Starts recording what `loop` does. A loop has at most one tracer and a tracer follows
  /// one loop at a time; attaching either twice throws (a loop whose thread has exited no
  /// longer counts). Safe from any thread. Attached while the loop sleeps, the tracer records
  /// that sleep from the moment of attaching.
  public func attach(to loop: Loop) throws(LoopError) {
    // Held across the loop's install so attach and detach happen one at a time. Lock order:
    // this lock, then the loop's. The loop never takes this one while holding its own.
    try lock.withLock { () throws(LoopError) in
      if let current = state.loop {
        guard current !== loop else { return }
        guard current.hasExited else {
          throw .invalidArgument(
            name: "LoopTracer.attach(to:)", value: "loop of \(loop.threadDescription)",
            reason:
              "this tracer already follows the loop of \(current.threadDescription); detach it")
        }
        current.removeTracer(self)
        state.token = 0
      }
      state.lastToken += 1
      // Read before the install: from then on the loop may stamp events with this token.
      let origin = loop.virtualClock?.start ?? createdAt
      let attachedAt = origin.duration(to: loop.now)
      try loop.installTracer(self, token: state.lastToken)
      state.threadNames[loop.threadID] = loop.traceTrackName
      state.loopThread = loop.threadID
      state.loop = loop
      state.token = state.lastToken
      state.attachedAt = attachedAt
      state.origin = origin
    }
  }

  /// Stops recording; a callout still running on the loop's thread is not recorded either.
  /// The events recorded so far stay readable.
  public func detach() {
    lock.withLock {
      state.loop?.removeTracer(self)
      state.loop = nil
      state.token = 0
    }
  }

  /// The events recorded so far, oldest first. Safe from any thread, while recording too.
  public var events: [Event] {
    lock.withLock { Array(state.ring[state.next...] + state.ring[..<state.next]) }
  }

  /// Events that did not fit in `capacity` and were dropped, oldest first.
  public var dropped: Int { lock.withLock { state.dropped } }

  /// The events recorded so far, oldest first, with their origin and the names of their
  /// threads, read together: what `chromeTraceJSON(of:)` renders. Safe from any thread.
  public func snapshot() -> Snapshot {
    lock.withLock {
      Snapshot(
        origin: state.origin, events: Array(state.ring[state.next...] + state.ring[..<state.next]),
        threadNames: state.threadNames, dropped: state.dropped)
    }
  }

  /// How many events were recorded so far, dropped and cleared ones included: a mark for
  /// `events(recordedSince:)`.
  var recordedCount: Int { lock.withLock { state.recorded } }

  /// The events recorded after `mark` (a `recordedCount`) that are still kept, oldest first.
  func events(recordedSince mark: Int) -> [Event] {
    lock.withLock {
      let kept = state.ring.count
      let wanted = min(kept, max(0, state.recorded - mark))
      let ordered = Array(state.ring[state.next...] + state.ring[..<state.next])
      return Array(ordered.suffix(wanted))
    }
  }

  /// Forgets every event recorded so far (keeps recording if attached).
  public func clear() {
    lock.withLock {
      state.ring.removeAll(keepingCapacity: true)
      state.next = 0
      state.dropped = 0
    }
  }

  /// Remembers the name of the thread with kernel id `thread` for its track, unless known.
  /// The name is read outside the lock (it may take a syscall), once per thread.
  func nameThread(_ thread: pid_t, _ name: () -> String) {
    guard lock.withLock({ state.threadNames[thread] == nil }) else { return }
    let name = name()
    lock.withLock {
      if state.threadNames[thread] == nil { state.threadNames[thread] = name }
    }
  }

  /// Records `kind` from `start` to `end` on the followed loop's clock, as happening on the
  /// loop's thread or, for what another thread sent, on `thread`. (The loop's phases pass no
  /// thread: a larger `TraceSink` made every phase's copy of it dearer.)
  func record(
    _ kind: Kind, from start: LoopClock.Instant, to end: LoopClock.Instant, depth: Int,
    mode: Loop.Mode, token: UInt64, thread: pid_t? = nil
  ) {
    lock.withLock {
      // A phase takes its sink before a callout and records after it; if the tracer was
      // detached (or moved to another loop) meanwhile, what that phase saw is not ours.
      guard state.token == token else { return }
      // Something that ended before the attach (a spin just before an attach-while-asleep).
      var event = Event(
        start: state.origin.duration(to: start), duration: start.duration(to: end),
        depth: depth, mode: mode, kind: kind, thread: thread ?? state.loopThread)
      guard event.end >= state.attachedAt else { return }
      if event.start < state.attachedAt {  // a sleep that began before the attach
        event.duration = event.end - state.attachedAt
        event.start = state.attachedAt
      }
      state.recorded += 1
      if state.ring.count < capacity {
        state.ring.append(event)
      } else {
        state.ring[state.next] = event
        state.next = (state.next + 1) % capacity
        state.dropped += 1
      }
    }
  }
}
