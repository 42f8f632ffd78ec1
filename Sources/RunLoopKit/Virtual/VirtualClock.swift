import Glibc
import Synchronization

/// The clock of a `VirtualLoop`'s loop, and who drives that loop now.
///
/// The loop reads its time here instead of CLOCK_MONOTONIC (`Loop.now`), and its wait phase
/// moves this clock instead of sleeping (Loop+VirtualWait.swift). The instant is an atomic so
/// any thread may read it (`perform(after:)` from another thread counts from it); only the
/// driving thread moves it.
///
/// Driving: the thread inside a run of the loop (or a `VirtualLoop` call) is the loop's
/// thread for that long, and `Loop.current` there answers the virtual loop. One thread at a
/// time; the calls nest on that thread. Between drives the loop's thread is its *owner*: the
/// thread that made it or drove it last (so a test's own thread may use `assumeIsolated()`).
final class VirtualClock: @unchecked Sendable {  // driver, depth, owner: guarded by `lock`
  private let nanoseconds: Atomic<Int64>
  /// See `VirtualLoop.autoAdvance`.
  let autoAdvance: Atomic<Bool>
  private let lock = Lock.make()
  private var driver: pthread_t?
  private var depth = 0
  private var owner = pthread_self()
  /// The latest instant a run may move the clock to on its own when it would sleep: the
  /// target of the `advance` in progress. The driving thread only.
  private var horizonStorage: LoopClock.Instant?

  /// Where the clock began: time zero of traces and messages.
  let start: LoopClock.Instant
  /// 1 for the first clock made in the process, 2 for the next…: tells apart, in a trace,
  /// the loops of two `VirtualLoop`s made on one thread (they share its thread id).
  let serial: UInt64
  private static let made = Atomic<UInt64>(0)

  init(start: LoopClock.Instant, autoAdvance: Bool) {
    self.start = start
    serial = VirtualClock.made.add(1, ordering: .relaxed).newValue
    nanoseconds = Atomic(start.nanoseconds)
    self.autoAdvance = Atomic(autoAdvance)
  }

  var now: LoopClock.Instant {
    LoopClock.Instant(nanoseconds: nanoseconds.load(ordering: .acquiring))
  }

  /// Moves the clock forward to `instant` (never back). The driving thread only.
  func move(to instant: LoopClock.Instant) {
    if instant > now { nanoseconds.store(instant.nanoseconds, ordering: .releasing) }
  }

  /// How far a run that would sleep may move the clock: to the limit of the `VirtualLoop`
  /// call in progress (the target of `advance`, the next due date of `step`, now for
  /// `runUntilIdle` and `runUntil`), auto-advance or not, since that call promised where the
  /// clock is when it returns; outside such a call, anywhere under auto-advance, otherwise
  /// not at all.
  var horizon: LoopClock.Instant {
    if let horizonStorage { return horizonStorage }
    return autoAdvance.load(ordering: .relaxed) ? .distantFuture : now
  }

  /// Runs `body` as the loop's driver, with `horizon` (if given) as the limit of the clock.
  /// `token`: the reservation of the async `runTask` this drive belongs to, if any.
  func driving<T, E: Error>(
    _ loop: Loop, horizon: LoopClock.Instant? = nil, token: UInt64? = nil,
    _ body: () throws(E) -> T
  ) throws(E) -> T {
    enter(token)
    // At every level, not only the first: a callout of this loop may drive another virtual
    // loop, whose callouts must see that one as current, and this one again after.
    let shadowed = LoopRegistry.shared.shadowCurrent(with: loop)
    let savedHorizon = horizonStorage
    if let horizon {
      // A VirtualLoop call made from a callout may not carry the clock past the target of
      // the call in progress: that call promised `now == target` when it returns.
      if let outer = savedHorizon, horizon > outer {
        fatalError(
          "RunLoopKit: a VirtualLoop call inside one of its callouts asked to move the clock "
            + "to \(Loop.virtualOffset(horizon, self)), past \(Loop.virtualOffset(outer, self)), "
            + "the target of the call in progress. Advance the clock from the test, after that "
            + "call returns.")
      }
      horizonStorage = horizon
    }
    defer {
      horizonStorage = savedHorizon
      LoopRegistry.shared.restoreCurrent(shadowed)
      leave()
    }
    return try body()
  }

  /// Whether the calling thread is the loop's thread now: its driver, or with no drive in
  /// progress, its owner (no thread while an async `runTask` holds the loop between drives).
  var isCurrentThread: Bool {
    let me = pthread_self()
    return lock.withLock {
      // Between the drives of an async `runTask` the loop is that call's alone.
      if driver == nil && reservation != nil { return false }
      return pthread_equal(driver ?? owner, me) != 0
    }
  }

  /// For a view from `assumeIsolated()` used on another thread than the one that made it: true
  /// on the driving thread, and between drives on any thread, which becomes the owner (a
  /// test that resumed on another thread after an `await` goes on where it left off). False
  /// while another thread drives, or while an async `runTask` is under way between its
  /// drives: the view's use would race with that drive.
  func claimForView() -> Bool {
    let me = pthread_self()
    return lock.withLock {
      if let driver { return pthread_equal(driver, me) != 0 }
      guard reservation == nil else { return false }
      owner = me
      return true
    }
  }

  /// Whether the calling thread is inside a drive now (not merely the owner).
  var isDrivenByCurrentThread: Bool {
    let me = pthread_self()
    return lock.withLock { driver.map { pthread_equal($0, me) != 0 } ?? false }
  }

  /// An async `runTask` under way: its drives come from whichever thread its caller resumes
  /// on, so between them the loop is held for that call alone (`enter` refuses other
  /// threads, and views refuse to be used), as one synchronous drive would hold it.
  private var reservation: UInt64?
  private var reservations: UInt64 = 0

  /// Holds the loop for one async `runTask`; returns the token its drives pass to `driving`.
  /// Traps when another call holds it or another thread drives it.
  func reserve() -> UInt64 {
    let me = pthread_self()
    let token = lock.withLock { () -> UInt64? in
      guard reservation == nil, driver.map({ pthread_equal($0, me) != 0 }) ?? true else {
        return nil
      }
      reservations += 1
      reservation = reservations
      return reservations
    }
    guard let token else { trapBusy("an async runTask") }
    return token
  }

  func release(_ token: UInt64) {
    lock.withLock { if reservation == token { reservation = nil } }
  }

  /// Task resumptions that left the loop's thread for Swift's global executor on their way
  /// back to the loop (a `Task.sleep` ended by a loop timer, RunLoopKitExecutors), not yet
  /// back: `runTask` does not move the clock while one is away, or a later timer would fire
  /// before the task it should follow. A job enqueued on the loop's executor from a thread
  /// that is not driving the loop counts one back (after it is queued: see `LoopExecutor`).
  /// Release/acquire: a driver that reads the count back at zero then finds the job queued.
  private let resumptionsAway = Atomic<Int>(0)

  func resumptionLeft() { resumptionsAway.add(1, ordering: .releasing) }

  /// Returns true when this brought the count back to zero: the caller then wakes the loop,
  /// since a `runTask` that ran the job before the count came down waits for that count.
  func jobArrived() -> Bool {
    var seen = resumptionsAway.load(ordering: .acquiring)
    guard seen > 0, !isDrivenByCurrentThread else { return false }
    while seen > 0 {
      let (done, now) = resumptionsAway.compareExchange(
        expected: seen, desired: seen - 1, ordering: .acquiringAndReleasing)
      if done { return seen == 1 }
      seen = now
    }
    return false
  }

  var hasResumptionsAway: Bool { resumptionsAway.load(ordering: .acquiring) > 0 }

  /// A cancelled `Task.sleep`'s timer still fires and runs its job, which then resumes
  /// nothing (the cancellation resumed the task already): that count never comes back.
  /// `runTask` forgets the counts after a real-time grace with nothing arriving.
  func forgetResumptionsAway() { resumptionsAway.store(0, ordering: .releasing) }

  /// Makes the calling thread the driver (or counts one more level of its drive); traps if
  /// another thread drives the loop now, or an async `runTask` other than `token`'s holds it.
  private func enter(_ token: UInt64?) {
    let me = pthread_self()
    let entered = lock.withLock { () -> Bool in
      if let driver {
        guard pthread_equal(driver, me) != 0 else { return false }
      } else {
        if let reservation, reservation != token { return false }
        driver = me
        owner = me
      }
      depth += 1
      return true
    }
    guard entered else { trapBusy("\(ThreadName.current)") }
  }

  private func trapBusy(_ who: String) -> Never {
    fatalError(
      "RunLoopKit: a VirtualLoop is driven by one thread at a time, and another thread (or an "
        + "async runTask between its drives) is inside one of its calls or runs now; \(who) "
        + "tried to drive it too. Drive it from one test thread, one call at a time, and post "
        + "work to it from others with loop.perform { … }.")
  }

  private func leave() {
    lock.withLock {
      depth -= 1
      if depth == 0 { driver = nil }
    }
  }
}
