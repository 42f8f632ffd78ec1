import Glibc
import Synchronization

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
/// and a lock per recorded event. A signal or wake-up another thread sends a traced loop costs
/// that thread a clock read (before it is sent), a `gettid`, the loop's lock, and the tracer's
/// lock two or three times (once more, the first time it sends, to learn its name); for a
/// `VirtualLoop`, also its clock's lock. A wake-up sent while holding the loop's lock (a timer
/// or descriptor added to a loop asleep on its futex, say) takes a small inbox's lock instead.
/// The record is a ring of `capacity` events: once full, the oldest events are dropped and
/// counted in `dropped`.
///
/// ```swift
/// let tracer = LoopTracer()
/// try tracer.attach(to: .current)
/// Loop.current.run(for: .milliseconds(100))
/// tracer.detach()
/// print(tracer.timeline())
/// ```
public final class LoopTracer: @unchecked Sendable {  // state: `lock`; inbox: `inboxLock`
  /// One thing the loop did.
  public struct Event: Sendable, Equatable {
    /// When it began, measured from the tracer's `origin`.
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
    /// thread that sent them. A Chrome trace gives each thread a track of its own (and each
    /// `VirtualLoop` one, since two of them may share a thread).
    public var threadID: pid_t
    /// The clock that stamped it: 0 for CLOCK_MONOTONIC, else the serial number of a
    /// `VirtualLoop`'s clock. Keeps apart, in a Chrome trace, loops that share a thread id.
    var clockID: UInt64 = 0

    /// When it ended, measured from the tracer's `origin`.
    public var end: Duration { start + duration }

    /// What happened, when and where: the clock's serial number is left out, so the same
    /// scenario on two `VirtualLoop`s records equal events.
    public static func == (a: Event, b: Event) -> Bool {
      a.start == b.start && a.duration == b.duration && a.depth == b.depth && a.mode == b.mode
        && a.kind == b.kind && a.threadID == b.threadID
    }
  }

  /// The most events kept; older ones are dropped first.
  public let capacity: Int
  /// Time zero of every event's `start`: when the tracer was made, or, while it follows a
  /// `VirtualLoop`'s loop, where that loop's virtual clock began (so two runs of the same
  /// scenario trace the same figures). Attaching to a loop with another origin moves the
  /// events kept so far to count from the new one.
  public var origin: LoopClock.Instant { lock.withLock { state.origin } }
  /// When the tracer was made, on CLOCK_MONOTONIC.
  private let createdAt: LoopClock.Instant
  /// A pthread mutex, not `Mutex`, so ThreadSanitizer sees the synchronisation.
  private let lock = Lock.make()
  private var state: State
  /// What threads holding the followed loop's lock sent it (see `post`), until a read or a
  /// record under `lock` takes it. A leaf lock: taken under the loop's, and under `lock`.
  private let inboxLock = Lock.make()
  /// Guarded by `inboxLock`.
  private var inbox = Inbox()
  /// Mirrors `!inbox.posts.isEmpty`, so taking nothing costs no lock.
  private let inboxFilled = Atomic<Bool>(false)

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
    /// The followed loop's clock (see `Event.clockID`).
    var clockID: UInt64 = 0
  }

  /// A sent instant waiting in the inbox, and the names of the threads that posted.
  private struct Inbox {
    var posts:
      [(
        kind: Kind, at: LoopClock.Instant, depth: Int, mode: Loop.Mode, token: UInt64,
        thread: pid_t
      )] = []
    var names: [pid_t: String] = [:]
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
      takeInboxLocked()
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
      // A VirtualLoop's track is named by the export: its thread may have a loop of its own.
      if loop.virtualClock == nil { state.threadNames[loop.threadID] = loop.traceTrackName }
      state.loopThread = loop.threadID
      state.clockID = loop.virtualClock?.serial ?? 0
      state.loop = loop
      state.token = state.lastToken
      state.attachedAt = attachedAt
      if origin != state.origin {
        // So every event kept still counts from `origin`.
        let shift = origin.duration(to: state.origin)
        for index in state.ring.indices { state.ring[index].start += shift }
        state.origin = origin
      }
    }
  }

  /// Stops recording; a callout still running on the loop's thread is not recorded either.
  /// The events recorded so far stay readable.
  public func detach() {
    lock.withLock {
      takeInboxLocked()
      state.loop?.removeTracer(self)
      state.loop = nil
      state.token = 0
    }
  }

  /// The events recorded so far, oldest first. Safe from any thread, while recording too.
  public var events: [Event] {
    lock.withLock {
      takeInboxLocked()
      return Array(state.ring[state.next...] + state.ring[..<state.next])
    }
  }

  /// Events that did not fit in `capacity` and were dropped, oldest first.
  public var dropped: Int {
    lock.withLock {
      takeInboxLocked()
      return state.dropped
    }
  }

  /// The events recorded so far, oldest first, with their origin and the names of their
  /// threads, read together: what `chromeTraceJSON(snapshots:)` renders. Safe from any thread.
  public func snapshot() -> Snapshot {
    lock.withLock {
      takeInboxLocked()
      return Snapshot(
        origin: state.origin, events: Array(state.ring[state.next...] + state.ring[..<state.next]),
        threadNames: state.threadNames, dropped: state.dropped)
    }
  }

  /// How many events were recorded so far, dropped and cleared ones included: a mark for
  /// `events(recordedSince:)`.
  var recordedCount: Int {
    lock.withLock {
      takeInboxLocked()
      return state.recorded
    }
  }

  /// The events recorded after `mark` (a `recordedCount`) that are still kept, oldest first.
  func events(recordedSince mark: Int) -> [Event] {
    lock.withLock {
      takeInboxLocked()
      let kept = state.ring.count
      let wanted = min(kept, max(0, state.recorded - mark))
      let ordered = Array(state.ring[state.next...] + state.ring[..<state.next])
      return Array(ordered.suffix(wanted))
    }
  }

  /// Forgets every event recorded so far (keeps recording if attached).
  public func clear() {
    lock.withLock {
      takeInboxLocked()
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
      takeInboxLocked()
      appendLocked(
        kind, from: start, to: end, depth: depth, mode: mode, token: token, thread: thread)
    }
  }

  /// Keeps an instant another thread sent while holding the followed loop's lock, which may not
  /// take `lock` (attaching takes `lock`, then the loop's); the next read or record of this
  /// tracer takes it. `name` is the sender's, asked for the first time it posts.
  func post(
    _ kind: Kind, at instant: LoopClock.Instant, depth: Int, mode: Loop.Mode, token: UInt64,
    thread: pid_t, name: () -> String
  ) {
    inboxLock.withLock {
      if inbox.names[thread] == nil { inbox.names[thread] = name() }
      inbox.posts.append((kind, instant, depth, mode, token, thread))
      inboxFilled.store(true, ordering: .relaxed)
    }
  }

  /// Moves what was posted into the ring, before anything recorded after it. `lock` is held.
  private func takeInboxLocked() {
    guard inboxFilled.load(ordering: .relaxed) else { return }
    let taken = inboxLock.withLock {
      inboxFilled.store(false, ordering: .relaxed)
      defer { inbox.posts = [] }
      return inbox
    }
    for (thread, name) in taken.names where state.threadNames[thread] == nil {
      state.threadNames[thread] = name
    }
    for post in taken.posts {
      appendLocked(
        post.kind, from: post.at, to: post.at, depth: post.depth, mode: post.mode,
        token: post.token, thread: post.thread)
    }
  }

  private func appendLocked(
    _ kind: Kind, from start: LoopClock.Instant, to end: LoopClock.Instant, depth: Int,
    mode: Loop.Mode, token: UInt64, thread: pid_t?
  ) {
    // A phase takes its sink before a callout and records after it; if the tracer was
    // detached (or moved to another loop) meanwhile, what that phase saw is not ours.
    guard state.token == token else { return }
    // Something that ended before the attach (a spin just before an attach-while-asleep).
    var event = Event(
      start: state.origin.duration(to: start), duration: start.duration(to: end),
      depth: depth, mode: mode, kind: kind, threadID: thread ?? state.loopThread,
      clockID: state.clockID)
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
