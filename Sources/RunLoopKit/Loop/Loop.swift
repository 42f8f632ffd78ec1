import CRunLoopShims
import Glibc
import Synchronization

/// A thread's run loop. Mirrors `CFRunLoop`: one per thread, created on first use by
/// `Loop.current`, run in named modes, fed by manual sources (source0), descriptor sources
/// (source1), ports, timers and perform blocks, and watched by observers.
///
/// Differences from CF:
/// - It sleeps in `epoll_wait` on the mode's own epoll set (one per mode) instead of
///   `mach_msg` on a port set; its wake-up port is an eventfd. A mode that watches no
///   descriptor sleeps on a futex instead (timers still wake it), the kernel's shortest
///   sleep-and-wake path.
/// - `perform(in:_:)` wakes the loop (CFRunLoopPerformBlock does not), and throws once the
///   loop's thread has exited instead of dropping the block.
/// - Adding an item to a second loop, or a bad descriptor, throws instead of being ignored.
/// - `.common` items and the common-mode set work as in CF; `.common` is never run itself.
///
/// Threading: `run` only on the loop's own thread (anything else traps, as in CF). Every other
/// call is safe from any thread. Callbacks run with no lock held, so they may add, remove or
/// invalidate anything, stop the loop, or run it again (a nested run).
public final class Loop: @unchecked Sendable {  // every mutable field is guarded by `lock`
  // Laid out in the order declared: what a wake touches (a poster waking a sleeping loop, the
  // loop between its wait and its first callout) comes first, on as few cache lines as can
  // be, since that path runs right after a sleep, on cold caches. Mutable fields are guarded
  // by `lock` unless they say otherwise; `@exclusivity(unchecked)` because the lock already
  // makes each access exclusive, and Swift's dynamic checks cost ~90 ns per post.
  let lock = Lock.make()
  /// Blocks just posted, queued without the lock (see the type); whoever holds the lock may
  /// move them into `blocks`. Its refusals are set when the thread exits (or is about to) and
  /// when a resident thread stops.
  let posted = PostQueue()
  /// Mirrors `sleeping` for posters, which do not take the lock unless it is set (see
  /// `PostQueue` for why a post is never left behind a sleep).
  let asleep = Atomic<Bool>(false)
  /// The wake-up word a loop sleeps on instead when its mode has no descriptor to watch.
  let futex = Futex()
  /// The loop's wake-up port, in every mode's epoll set. Made with the loop or, when the
  /// process was out of descriptors then, with its first mode (`Loop.current` must answer
  /// whatever the descriptor table holds). Set once, so a poster that saw it may use it.
  @exclusivity(unchecked) var wakeFD: EventFD?
  /// True while the loop thread is (about to be) blocked in the kernel.
  @exclusivity(unchecked) var sleeping = false
  /// A wake-up arrived while the loop was busy (a source or a timer changed from another
  /// thread, a nested run's return; posts are seen in the post queue, and `wakeUp()` leaves
  /// `wakeAsked` instead): its next wait must not block.
  @exclusivity(unchecked) var wakeRequested = false
  /// A wake-up has been sent (eventfd write or futex wake) since the loop last prepared to
  /// wait; further wakes need no syscall.
  @exclusivity(unchecked) var wakeWritten = false
  /// The eventfd in particular has been written and must be drained before the next wait.
  @exclusivity(unchecked) var wakeFDWritten = false
  /// The loop is (about to be) asleep on `futex` rather than in `epoll_wait`, in the mode
  /// `futexSleepMode`, until `futexSleepUntil` (nil: no deadline).
  @exclusivity(unchecked) var sleepingOnFutex = false
  /// Set when the owning thread exited and the loop let go of its items and descriptors.
  @exclusivity(unchecked) var tornDown = false
  /// The last wait returned with the wake-up eventfd readable: drain it before the next wait.
  @exclusivity(unchecked) var wakeFDReadable = false
  /// Counts returns from the kernel wait; a change while callbacks run means a nested run has
  /// waited meanwhile and what this pass saw ready may no longer be.
  @exclusivity(unchecked) var waitGeneration: UInt64 = 0
  /// Wake-ups sent (eventfd writes and futex wakes): the cost the wake coalescing saves.
  @exclusivity(unchecked) var wakeWrites: UInt64 = 0
  /// See `WaitPolicy`.
  @exclusivity(unchecked) var policy = WaitPolicy.sleep
  @exclusivity(unchecked) var futexSleepMode: ObjectIdentifier?  // see `sleepingOnFutex`
  @exclusivity(unchecked) var futexSleepUntil: LoopClock.Instant?
  /// The loop is asleep in the epoll set of `epollSleepMode`, and that wait's own timeout
  /// carries the mode's timer date `epollSleepTimerDate` (nil: the timerfd carries it, or the
  /// mode has no timer). See `Loop.commitToWait`.
  @exclusivity(unchecked) var epollSleepMode: ObjectIdentifier?
  @exclusivity(unchecked) var epollSleepTimerDate: LoopClock.Instant?
  /// The loop has set its thread's timer slack to the least (see `lowerTimerSlackOnce`).
  @exclusivity(unchecked) var timerSlackLowered = false
  /// When the current sleep began (see `outermostRunStart`).
  @exclusivity(unchecked) var sleepStart: LoopClock.Instant?
  /// The latest instant a `metrics` snapshot counted the current sleep up to. The sleep's end
  /// is read just before the lock is taken, so it may be earlier; counting the sleep to this
  /// instant at least keeps `timeAsleep` from going backwards between snapshots.
  @exclusivity(unchecked) var asleepReportedUntil: LoopClock.Instant?
  /// Under `.adaptive`: when the first wake-up of the current sleep was asked for.
  @exclusivity(unchecked) var wakeAskedAt: LoopClock.Instant?
  /// Mirrors `tracer != nil`, so an untraced loop checks it without taking the lock.
  let tracing = Atomic<Bool>(false)
  /// Mirrors `wakeRequested` for a spinning loop, which must not take the lock on every turn.
  let wakePending = Atomic<Bool>(false)
  /// A wake-up `wakeUp()` asked for without the lock, of a loop it did not find asleep: read
  /// with `wakeRequested` wherever that is, and once more after a sleep is said (`asleep`).
  let wakeAsked = Atomic<Bool>(false)
  /// Blocks taken out of `posted` and not yet drained, in the order posted (older than any
  /// block still in `posted`).
  @exclusivity(unchecked) var blocks: [QueuedBlock] = []
  /// Blocks a drain found for modes other than the one it ran, older than every block in
  /// `blocks` and in the order posted. Kept apart so a pass does not copy them back into the
  /// queue every time (see `performBlocks`).
  @exclusivity(unchecked) var deferredBlocks: [QueuedBlock] = []
  /// The batch the last drain emptied, for the next (`performBlocks`; loop's thread only).
  @exclusivity(unchecked) var spareBatch: DrainBatch?
  /// The largest batch a drain keeps (16 384 blocks, 640 KB). Four threads posting flat out
  /// fill ~5 000 blocks per pass; with a lower limit (it was 4 096) every such drain let its
  /// buffer go and the next one regrew it, which cost about a tenth of the throughput.
  static let drainBufferLimit = 16_384
  /// The wait's list of ready events and the descriptor phase's list, kept between passes so
  /// a pass allocates none. Only the loop's thread touches them.
  @exclusivity(unchecked) var readyBuffer: [Epoll.Event] = []
  @exclusivity(unchecked) var deliveryBuffer: [Delivery] = []
  /// The sources whose handlers left work for before the next wait (a port's eventfd drain);
  /// sources, not closures, which an array stores behind a thunk allocated per append. Only
  /// the loop's thread touches it.
  @exclusivity(unchecked) var drainsBeforeWait: [DescriptorSource] = []
  /// One frame per active `run` call, innermost last.
  @exclusivity(unchecked) var frames: [RunFrame] = []
  /// The running job and the work held back meanwhile (Loop+ExecutorJobs; loop's thread only).
  @exclusivity(unchecked) var jobs = JobState()
  /// See `Metrics`; fields kept elsewhere (waits, wake-ups, rebuilds) join in a snapshot.
  @exclusivity(unchecked) var counters = Metrics()

  // MARK: The rest of the state

  /// Moves when a manual source is signalled or joins a mode signalled (see `ModeState`).
  let manualSignals = Atomic<UInt64>(0)
  let thread: pthread_t
  /// The kernel thread id of the owner, for messages.
  let threadID: pid_t
  /// Whether the owner is the process's main thread (its thread id is the process id): only
  /// that loop serves the main queue. Kept, so a run makes no `getpid`/`gettid` calls.
  let isMainThreadLoop: Bool
  /// The owner's name when the loop was created (a resident thread names itself first).
  let threadName: String?
  @exclusivity(unchecked) var modeStates: [Mode: ModeState] = [:]
  /// The names of `modes`, in the order they were made (see `Loop.modes`).
  @exclusivity(unchecked) var modesMade: [Mode] = []
  /// The mode `modeLocked` returned last (see there); dropped with `modeStates` at teardown.
  /// Unmanaged: `modeStates` owns it, and reading it then costs the add path no retain and
  /// release (an atomic each, which waits for the timer's cache misses before it).
  @exclusivity(unchecked) var lastModeFound: Unmanaged<ModeState>?
  @exclusivity(unchecked) var commonModeNames: [Mode] = [.default]
  /// Items added to `.common`; every mode later added to the common set receives them.
  let commonItems = ItemSet<any LoopItem> { ObjectIdentifier($0) }
  /// The next epoll token for a descriptor registration (1 and 2 are the loop's own).
  @exclusivity(unchecked) var nextToken: UInt64 = 3
  /// Timers whose handler is running (teardown reaches them out of heaps), and the list the
  /// last timer phase emptied, kept for the next (see `fireTimers`).
  @exclusivity(unchecked) var firingTimers: [LoopTimer] = []
  @exclusivity(unchecked) var spareDueTimers: [LoopTimer] = []
  /// How many times a mode's epoll set was rebuilt to shed a registration it could not remove.
  @exclusivity(unchecked) var epollRebuilds = 0
  /// Timers (delayed blocks and sleeps included) bound to this loop so far: a `VirtualLoop`
  /// reads it to tell that code meant for it scheduled on this thread's real loop instead.
  @exclusivity(unchecked) var timersBound: UInt64 = 0
  /// Under `.adaptive`: what the policy learned. Only the loop's own thread touches it, while
  /// it waits (the one field `lock` does not guard).
  @exclusivity(unchecked) var adaptiveSpin = AdaptiveSpin()
  /// The blocks `performAsSource` queued, and their sources.
  let sourcePerforms = SourcePerformQueue()
  /// Manual sources signalled since the loop last looked (see `SignalInbox`), and the buffer
  /// the last look swapped out of it, kept for the next.
  let signalInbox = SignalInbox()
  @exclusivity(unchecked) var inboxBuffer: [ManualSource] = []
  /// The latest clock reading a run on the loop's thread took (see `hasPassed`); loop's
  /// thread only.
  @exclusivity(unchecked) var clockFloor = LoopClock.Instant(nanoseconds: .min)
  /// Stamps entries of the ready sources (see `ReadySources.Entry.stamp`). Under the lock.
  @exclusivity(unchecked) var readyStamps: UInt64 = 0
  /// When the outermost active run started, and when the current sleep began: `metrics`
  /// adds the time since to `timeRunning` and `timeAsleep`, so a loop that never returns
  /// from `run` (a resident thread's) still reports true figures.
  @exclusivity(unchecked) var outermostRunStart: LoopClock.Instant?
  /// The callout the loop's thread is in, for stall watches (`watchStalls`).
  let calloutBoard = CalloutBoard()
  /// The attached `LoopTracer`, if any, and the token of that attach.
  @exclusivity(unchecked) var tracer: LoopTracer?
  @exclusivity(unchecked) var tracerToken: UInt64 = 0
  /// `Loop.main` only: whether it watches the main dispatch queue.
  var mainQueue = MainQueueState()
  /// The executor once handed out; dropped at teardown (it holds the loop strongly).
  var executorStorage: LoopExecutor?
  /// The mode a `LoopEmbedding` drives, and (read without the lock, by signals) whether it
  /// sleeps between the host's passes now (Loop+Embedding.swift).
  @exclusivity(unchecked) var embeddedMode: ModeState?
  let embeddedIdle = Atomic<Bool>(false)
  /// The mode a `VirtualLoop`'s `runUntil` waits in for other threads' work, while it waits
  /// (Loop+VirtualDriving.swift).
  @exclusivity(unchecked) var outsideWorkMode: Mode?
  /// The loop's final drain has run (Loop+FinalDrain.swift; the loop's thread only).
  @exclusivity(unchecked) var finalDrainDone = false

  // MARK: Rarely used state

  /// A target none of `deferredBlocks` applies to, as the last drain found: a drain for the
  /// same target (the same mode, not made common since) need not look at them again.
  @exclusivity(unchecked) var deferredBlocksSkip: QueuedBlock.Target?
  /// How many times a drain set a block aside for another mode: once per such block, however
  /// many passes it waits (for tests).
  @exclusivity(unchecked) var blocksSetAside: UInt64 = 0
  /// Items bound to this loop that are in no mode (held weakly; see the type).
  let unscheduledItems = UnscheduledItems()
  /// An empty epoll set kept in reserve from the first descriptor source on, so that shedding
  /// a registration the loop could not remove (a rebuild) needs no new descriptor: see
  /// `rebuildEpollSetLocked`.
  @exclusivity(unchecked) var spareEpoll: Epoll?
  /// Which file each user descriptor source was made for (see the type); made with
  /// `spareEpoll`, when the first such source is added.
  @exclusivity(unchecked) var witnesses: DescriptorWitnesses?
  /// How many rebuilds found no descriptor for the new set (see `rebuildEpollSetLocked`).
  @exclusivity(unchecked) var epollRebuildFailures = 0
  /// How many times the loop asked the kernel whether a registration still watches its file
  /// (an `epoll_ctl` each; see `Loop+Descriptors.swift`), for tests.
  @exclusivity(unchecked) var registrationChecks = 0
  /// How many of those were made on the way from a wake-up to a handler, for tests.
  @exclusivity(unchecked) var deliveryChecks = 0
  /// A `VirtualLoop`'s clock, which the loop reads and moves instead of CLOCK_MONOTONIC and
  /// sleeping; nil for the loop of a thread. Last, so that adding it moved no hot field.
  let virtualClock: VirtualClock?

  struct RunFrame {
    let mode: Mode
    var stopRequested = false
  }

  init(thread: pthread_t, threadID: pid_t, virtualClock: VirtualClock? = nil) {
    self.thread = thread
    self.threadID = threadID
    self.isMainThreadLoop = virtualClock == nil && threadID == getpid()
    self.threadName = ThreadName.of(thread)
    self.virtualClock = virtualClock
    // Out of descriptors, the loop exists without it; its first mode makes it or throws.
    wakeFD = try? EventFD()
  }

  // MARK: - Getting a loop

  /// The calling thread's loop, created the first time a thread asks. It is torn down when
  /// the thread exits: manual sources are cancelled, descriptors unregistered, fds closed.
  public static var current: Loop { LoopRegistry.shared.current() }

  /// The main thread's loop, from any thread. When the main thread runs it, it also serves
  /// `DispatchQueue.main` and the main actor in its common modes, as CFRunLoop does for
  /// Foundation's `RunLoop.main` (see `Loop+MainQueue.swift` and the Swift concurrency article).
  public static var main: Loop { LoopRegistry.shared.main() }

  // MARK: - Running

  /// Runs the loop in `mode` until `duration` has passed, it is stopped, the mode is empty,
  /// or (optionally) a source has been handled. A zero duration does exactly one pass and
  /// never sleeps. Call only on the loop's own thread.
  @available(
    *, noasync,
    message:
      "Loop.run blocks its thread until the run ends; from async code, await work on the loop's thread instead (loop.perform, ResidentThread.run) and let that thread run its loop"
  )
  @discardableResult
  public func run(
    in mode: Mode = .default, for duration: Duration, returnAfterSourceHandled: Bool = false
  ) -> RunResult {
    return runMode(
      mode, until: instant(after: duration), returnAfterSourceHandled: returnAfterSourceHandled)
  }

  /// Runs the loop in `mode` until `deadline`, or until stopped, empty or a source is handled.
  @available(
    *, noasync,
    message:
      "Loop.run blocks its thread until the run ends; from async code, await work on the loop's thread instead (loop.perform, ResidentThread.run) and let that thread run its loop"
  )
  @discardableResult
  public func run(
    in mode: Mode = .default, until deadline: LoopClock.Instant,
    returnAfterSourceHandled: Bool = false
  ) -> RunResult {
    runMode(mode, until: deadline, returnAfterSourceHandled: returnAfterSourceHandled)
  }

  /// Runs the loop in `mode` with no deadline: until stopped, empty or a source is handled.
  @available(
    *, noasync,
    message:
      "Loop.run blocks its thread until the run ends; from async code, await work on the loop's thread instead (loop.perform, ResidentThread.run) and let that thread run its loop"
  )
  @discardableResult
  public func run(in mode: Mode, returnAfterSourceHandled: Bool = false) -> RunResult {
    runMode(mode, until: nil, returnAfterSourceHandled: returnAfterSourceHandled)
  }

  /// Runs the default mode over and over until a run returns `.stopped` or `.finished`
  /// (CFRunLoopRun). Returns at once if the default mode is empty.
  @available(
    *, noasync,
    message:
      "Loop.run blocks its thread until the run ends; from async code, await work on the loop's thread instead (loop.perform, ResidentThread.run) and let that thread run its loop"
  )
  public func run() {
    while true {
      let result = runMode(.default, until: nil, returnAfterSourceHandled: false)
      if result == .stopped || result == .finished { return }
    }
  }

  /// `onePass` (a `VirtualLoop.step()`) ends the run after its first pass, with what a run
  /// of zero duration returns then.
  func runMode(
    _ name: Mode, until deadline: LoopClock.Instant?, returnAfterSourceHandled: Bool,
    onePass: Bool = false
  ) -> RunResult {
    // A virtual loop's thread is whichever thread drives it (see `VirtualLoop`).
    if let virtualClock {
      return virtualClock.driving(self) {
        runOwnMode(name, until: deadline, returnAfterSourceHandled, onePass: onePass)
      }
    }
    requireOwnThread(for: "run(in: \(name))")
    return runOwnMode(name, until: deadline, returnAfterSourceHandled, onePass: onePass)
  }

  /// A run on the loop's own thread, from entry to exit.
  private func runOwnMode(
    _ name: Mode, until deadline: LoopClock.Instant?, _ returnAfterSourceHandled: Bool,
    onePass: Bool
  ) -> RunResult {
    if isMainThreadLoop { serveMainQueueIfMainThread() }
    // An empty (or missing) mode returns at once without telling any observer, as in CF.
    let live = lock.withLock { () -> ModeState? in
      guard let mode = liveModeLocked(name) else { return nil }
      if frames.isEmpty { beginOutermostRunLocked() }
      frames.append(RunFrame(mode: name))
      return mode
    }
    guard let mode = live else {
      traceSink(name, runsBelow: 1)?.record(.returned(.finished))
      return .finished
    }
    notifyObservers(.entry, in: mode)
    let result = iterate(
      mode, until: deadline, returnAfterSourceHandled: returnAfterSourceHandled, onePass: onePass)
    notifyObservers(.exit, in: mode)
    traceSink(name)?.record(.returned(result))
    let signal = lock.withLock { () -> WakeSignal in
      _ = frames.popLast()
      if frames.isEmpty, let start = outermostRunStart {
        counters.timeRunning += start.duration(to: now)
        outermostRunStart = nil
      }
      // A nested run may have consumed a wake-up meant for the run it returns to (a block
      // posted for the outer mode, say); make the outer run look again before it sleeps.
      if !frames.isEmpty { wakeRequested = true }
      // An embedded mode sleeps again between the host's passes.
      return embeddedMode.map { idleLocked($0) } ?? .none
    }
    send(signal)
    return result
  }

  /// The body of a run: one pass per turn of the loop, in CFRunLoop's order.
  private func iterate(
    _ mode: ModeState, until deadline: LoopClock.Instant?, returnAfterSourceHandled: Bool,
    onePass: Bool
  ) -> RunResult {
    // A stop requested by an entry observer ends the run before its first pass.
    if let ended = lock.withLock({
      endOrBeginPassLocked(mode, checkingEmpty: false, beginning: true)
    }) {
      return ended
    }
    while true {
      notifyObservers(.beforeTimers, in: mode)
      notifyObservers(.beforeSources, in: mode)
      performBlocks(in: mode)
      var sourceHandled = performManualSources(in: mode, onlyOne: returnAfterSourceHandled)
      if sourceHandled { performBlocks(in: mode) }

      // Work was done, time is up, or the mode emptied (nothing of its own could ever wake
      // it): look at the kernel without sleeping.
      let poll =
        sourceHandled || deadline.map(hasPassed) == true
        || lock.withLock { isEmptyLocked(mode) }
      if !poll { notifyObservers(.beforeWaiting, in: mode) }
      let woke = waitForEvents(in: mode, until: deadline, poll: poll)
      if !poll { notifyObservers(.afterWaiting, in: mode) }

      if woke.timerExpired { fireTimers(in: mode) }
      if !(sourceHandled && returnAfterSourceHandled) {
        let handled = handleDescriptors(woke, in: mode, onlyOne: returnAfterSourceHandled)
        sourceHandled = sourceHandled || handled
      }
      performBlocks(in: mode)

      if sourceHandled && returnAfterSourceHandled { return .handledSource }
      if let deadline, hasPassed(deadline) { return .timedOut }
      if let ended = lock.withLock({
        endOrBeginPassLocked(mode, checkingEmpty: true, beginning: !onePass)
      }) {
        return ended
      }
    }
  }
}
