import Synchronization

/// Fires a handler at a given instant, once or on a fixed grid. Mirrors `CFRunLoopTimer`.
///
/// - A one-shot timer (interval `nil`) fires once and is then invalid.
/// - A repeating timer that falls behind fires once, and its next fire date stays on the
///   original grid (the first grid point after now), exactly as CF does.
/// - A handler that sets `fireDate` moves the timer there for its next round; a date in the
///   past means now, so the timer fires again on the next pass (CF's rule: the next fire date
///   is honoured when it is later than the date just fired, and a past date becomes now).
/// - `tolerance` lets the loop fire this timer late by up to that much so several timers can
///   share one wake; a timer never fires before its fire date.
///
/// Differences from CF: times are `LoopClock` instants and `Duration`s rather than
/// CFAbsoluteTime; a bad interval or tolerance throws instead of being clamped; a timer added
/// to a second loop throws instead of being ignored.
public final class LoopTimer: @unchecked Sendable {  // state under binding.lock / the loop lock
  // Stored properties are laid out in declaration order: what adding, cancelling and sifting
  // touch comes first, so those share the object's first cache line or two (with a million
  // timers, each further line is a cache miss per operation).

  typealias Handler = (LoopTimer) -> Void

  /// What other items keep in an `ItemBinding` object, a timer keeps in itself, under the
  /// same rules: its lock is a shared stripe (`LockStripes`) and its `BindingState` is stored
  /// in the timer (`bindingState`). That saves two allocations per timer and a
  /// second object to touch on every add and cancel (measured with a million timers: a cancel
  /// in random order cost about a tenth less than with a binding object of its own).
  struct Binding {
    /// Guards the fields the docs below say, and nothing else is acquired while it is held.
    /// No reference count: the stripes live as long as the process (see `StripeLock`).
    let lock: StripeLock
  }

  // `@exclusivity(unchecked)` on the mutable fields below: each is guarded by a lock (named
  // on the field), which already makes every access exclusive; the dynamic checks Swift makes
  // otherwise cost about a fifth of an add (measured with a million timers).

  let binding: Binding
  /// Where this timer sits in each mode's heap. Guarded by the owner loop's lock.
  @exclusivity(unchecked) var slots = TimerSlots()
  /// Its loop and validity, as an `ItemBinding` holds them. Guarded by `binding.lock`.
  @exclusivity(unchecked) private var bindingState = BindingState()
  /// Set (for good) before the timer is first added to `.common`; until then cancelling it
  /// need not look in the loop's common items. Next to `bindingState`, which a cancel reads
  /// too, so both share a cache line.
  let mayBeCommon = Atomic<Bool>(false)
  // The flags fill the padding before `storedHandler`, where an add and a cancel read them.
  /// Guarded by the owner loop's lock.
  @exclusivity(unchecked) var isFiring = false
  /// The handler was given through `IsolatedLoop` (or is a block given there): it lets go of
  /// what it captured on the loop's thread only (see `Loop.releaseOnOwnThread`).
  let releasesOnLoopThread: Bool
  /// The timer of a `loop.sleep`: its loop ends it before the final drain of a thread's exit,
  /// so that a task sleeping on the loop resumes while the loop can still run it.
  let endsSleep: Bool
  /// `fireDate` was set since the timer's callout began: the loop honours that date after
  /// the callout even when it equals the date just fired (as it does on a virtual loop, where
  /// no time passes in a callout). Guarded by `binding.lock`.
  @exclusivity(unchecked) var fireDateSet = false
  /// Whether the timer repeats: fixed at creation, as `interval` can change but not to or
  /// from nil, so a fire reads it with no lock.
  let repeats: Bool
  /// Guarded by `binding.lock`; nil once the timer is invalid (a one-shot timer that fired
  /// included), so nothing it captured outlives it: CFRunLoopTimerInvalidate releases the
  /// timer's context the same way.
  @exclusivity(unchecked) private var storedHandler: Handler?
  /// Guarded by `binding.lock`.
  @exclusivity(unchecked) var storedFireDate: LoopClock.Instant
  /// In nanoseconds, which leaves room for `pendingDelay` without making the timer larger.
  /// Guarded by `binding.lock`.
  @exclusivity(unchecked) private var storedTolerance: Int64
  /// The delay `init(after:)` was given, in nanoseconds, until the timer is first bound
  /// (`noPendingDelay` otherwise). A loop of a thread ignores it: the fire date was counted
  /// from the real now at creation, as CF counts it. A `VirtualLoop`'s loop counts it from its
  /// virtual now instead when the timer is first added there. Guarded by `binding.lock`.
  @exclusivity(unchecked) private var pendingDelay: Int64
  /// The tolerance its heap entries were keyed with (the same in every mode), kept here rather
  /// than in each entry so entries stay small; in nanoseconds, as `storedTolerance`. Guarded
  /// by the owner loop's lock.
  @exclusivity(unchecked) var scheduledTolerance: Int64 = 0
  /// Breaks ties between equal fire dates: earlier-created timers first. After the fields an
  /// add and a cancel touch: a sift reads it only when two fire dates are equal. (With the
  /// flags in padding, this order makes a timer 184 bytes: a 192-byte malloc chunk, where
  /// 200 bytes took 208.)
  let sequence: UInt64

  /// The repeat interval (`interval`); guarded by `binding.lock`.
  @exclusivity(unchecked) var storedInterval: Duration?
  /// A name for traces and `debugDescription`; the loop does not use it otherwise.
  public let label: String?
  /// Kept for parity with `CFRunLoopTimerGetOrder`. Like CF, the loop ignores it: timers due
  /// together fire by fire date, then in the order they were created.
  public let order: Int

  /// - Parameters:
  ///   - label: a name for traces and `debugDescription`.
  ///   - fireDate: when to fire first; a date in the past fires on the loop's next pass.
  ///   - interval: the repeat interval, or `nil` for a one-shot timer; must be greater than
  ///     zero.
  ///   - tolerance: how late the loop may fire it to coalesce wakes; must not be negative.
  ///   - order: kept for parity with CF, which ignores a timer's order too: timers due
  ///     together fire by fire date, then in the order they were created.
  ///   - handler: called on the loop's thread each time the timer fires. It is `sending`,
  ///     not `@Sendable`: it may capture a non-Sendable value the caller hands over and no
  ///     longer uses, since it only ever runs on the one loop the timer is added to.
  /// - Throws: `LoopError.invalidArgument` for an interval that is not greater than zero or
  ///   a negative tolerance, naming the value and the rule.
  ///
  /// CF counterpart: `CFRunLoopTimerCreateWithHandler`.
  public convenience init(
    label: String? = nil,
    fireAt fireDate: LoopClock.Instant,
    interval: Duration? = nil,
    tolerance: Duration = .zero,
    order: Int = 0,
    handler: sending @escaping (LoopTimer) -> Void
  ) throws(LoopError) {
    try self.init(
      label: label, firstFireAt: fireDate, interval: interval, tolerance: tolerance,
      order: order, handler: handler)
  }

  /// Every initialiser ends here. The handler is no longer `sending`: the public
  /// initialisers have that proof already, and the library's own callers (delayed blocks)
  /// pass a block that arrived as `sending`.
  init(
    label: String?, firstFireAt fireDate: LoopClock.Instant, interval: Duration? = nil,
    tolerance: Duration = .zero, order: Int = 0, releasesOnLoopThread: Bool = false,
    endsSleep: Bool = false, handler: @escaping Handler
  ) throws(LoopError) {
    if let interval, interval <= .zero {
      throw LoopTimer.invalid("timer interval", "\(interval)", LoopTimer.intervalRule)
    }
    if tolerance < .zero {
      throw LoopTimer.invalid("timer tolerance", "\(tolerance)", LoopTimer.toleranceRule)
    }
    let sequence = SignalClock.next()
    self.sequence = sequence
    self.binding = Binding(lock: LockStripes.lock(for: sequence))
    self.storedInterval = interval
    self.repeats = interval != nil
    self.label = label
    self.order = order
    self.releasesOnLoopThread = releasesOnLoopThread
    self.endsSleep = endsSleep
    self.storedHandler = handler
    self.storedFireDate = fireDate
    // Most timers have none: the zero test spares them Duration's 128-bit division.
    self.storedTolerance = tolerance == .zero ? 0 : tolerance.saturatedNanoseconds
    self.pendingDelay = LoopTimer.noPendingDelay
  }

  /// Computed, not stored: a stored static is a lazily made global, checked on each use.
  @inline(__always) static var noPendingDelay: Int64 { .min }

  /// A stored tolerance as a `Duration`; zero, the common case, without arithmetic.
  @inline(__always)
  static func duration(nanoseconds: Int64) -> Duration {
    nanoseconds == 0 ? .zero : .nanoseconds(nanoseconds)
  }

  /// A timer that first fires `delay` from now. A delay of zero or less fires on the loop's
  /// next pass, as CF and `DispatchQueue.asyncAfter` treat a date already past.
  /// - Throws: as `init(label:fireAt:interval:tolerance:order:handler:)`.
  public convenience init(
    label: String? = nil,
    after delay: Duration,
    repeating interval: Duration? = nil,
    tolerance: Duration = .zero,
    order: Int = 0,
    handler: sending @escaping (LoopTimer) -> Void
  ) throws(LoopError) {
    // Converted once: the fire date and the pending delay share it.
    let nanoseconds = delay > .zero ? delay.saturatedNanoseconds : 0
    try self.init(
      label: label, fireAt: LoopClock.Instant.now.advanced(nanoseconds: nanoseconds),
      interval: interval, tolerance: tolerance, order: order, handler: handler)
    pendingDelay = nanoseconds
  }

  /// CF-style construction from seconds (`CFTimeInterval`), under the same rules as the
  /// `Duration` initialisers: a delay of zero or less fires on the next pass, an interval
  /// must be greater than zero, a tolerance must not be negative. NaN and infinite values
  /// throw, where CF would clamp them silently.
  /// - Throws: `LoopError.invalidArgument` naming the value and the rule it broke.
  public convenience init(
    label: String? = nil,
    afterSeconds delay: Double,
    repeatingEverySeconds interval: Double? = nil,
    toleranceSeconds tolerance: Double = 0,
    order: Int = 0,
    handler: sending @escaping (LoopTimer) -> Void
  ) throws(LoopError) {
    try self.init(
      label: label, after: LoopTimer.duration("timer delay", delay),
      repeating: try interval.map { seconds throws(LoopError) in
        try LoopTimer.duration("timer interval", seconds)
      },
      tolerance: LoopTimer.duration("timer tolerance", tolerance),
      order: order, handler: handler)
  }

  static let intervalRule = "a repeat interval must be greater than zero"
  static let toleranceRule = "a tolerance must not be negative"

  static func invalid(_ name: String, _ value: String, _ rule: String) -> LoopError {
    .invalidArgument(name: name, value: value, reason: rule)
  }

  /// Seconds as a `Duration`; the sign is left to the `Duration` rules above.
  private static func duration(_ name: String, _ seconds: Double) throws(LoopError) -> Duration {
    guard seconds.isFinite else {
      throw invalid(name, "\(seconds) s", "a time in seconds must be a finite number")
    }
    // Beyond ~292 years a nanosecond count no longer fits; such a timer never fires anyway.
    let limit = 9.2e9
    return .nanoseconds(Int64(min(max(seconds, -limit), limit) * 1e9))
  }

  /// The next time the timer fires. Settable from any thread, including its own handler.
  /// A date in the past means now, as `CFRunLoopTimerSetNextFireDate` has it: set from the
  /// timer's own handler, it makes a repeating timer fire again on the next pass.
  ///
  /// Setting it on an invalid timer does nothing, as in CF: the timer can never fire, and
  /// reading the property gives the date it had when it was invalidated.
  public var fireDate: LoopClock.Instant {
    get { binding.lock.withLock { storedFireDate } }
    set {
      changeSchedule { now in
        storedFireDate = max(newValue, now)
        pendingDelay = LoopTimer.noPendingDelay
        fireDateSet = true
      }
    }
  }

  /// How late the timer may fire to share a wake with others. Negative values become zero.
  /// Setting it on an invalid timer does nothing, like setting `fireDate`.
  public var tolerance: Duration {
    get { binding.lock.withLock { LoopTimer.duration(nanoseconds: storedTolerance) } }
    set {
      let value = max(newValue, .zero).saturatedNanoseconds
      changeSchedule { _ in storedTolerance = value }
    }
  }

  /// Applies `change` (under `binding.lock`) while the timer is valid, and re-keys it in its
  /// loop's heaps when it is bound. Validity is checked in the same hold of the lock that
  /// makes the change, so a change racing `invalidate()` is either made before it or dropped.
  /// `change` is given the now of the timer's loop's clock (the real one while unbound).
  func changeSchedule(_ change: (LoopClock.Instant) -> Void) {
    let owner = binding.lock.withLock { () -> Loop? in
      guard bindingState.isValid else { return nil }
      if let loop = bindingState.loop { return loop }
      change(.now)
      return nil
    }
    guard let owner else { return }
    let now = owner.now
    owner.reschedule(self) { [self] in
      if bindingState.isValid { change(now) }
    }
  }

  /// False once the timer was invalidated, a one-shot timer has fired, or its loop was torn
  /// down. Mirrors `CFRunLoopTimerIsValid`.
  public var isValid: Bool { binding.lock.withLock { bindingState.isValid } }

  /// Stops the timer for good and removes it from every mode, then releases its handler and
  /// whatever the handler captured. Safe from any thread, including its own handler (whose
  /// call finishes).
  public func invalidate() {
    // A timer has no cancel callback that must outlive its detaching, so the handler is taken
    // in the same hold of the lock that invalidates it (nothing can fire it from then on: the
    // loop checks validity under this lock before every callout).
    // Locked by hand, and the handler released through `release(_:)` rather than
    // `withExtendedLifetime`: a closure that passes through a generic is re-wrapped in a
    // thunk, an allocation each time (three per cancel, measured).
    binding.lock.lock()
    let (wasValid, owner) = bindingState.invalidate()
    let handler = wasValid ? storedHandler.take() : nil
    binding.lock.unlock()
    guard wasValid else { return }
    // From here until the loop's lock is taken, the timer is invalid but still in its modes.
    // The loop may meet it so first (its callout ends, or its thread exits): whichever holds
    // the loop's lock first detaches it (`Loop.retireTimerLocked`), and the other finds
    // nothing left to do.
    TestPausePoint.reach(.timerInvalidatedNotYetDetached, by: self)
    guard let owner else { return LoopTimer.release(handler) }
    owner.detachTimerEverywhere(self)
    // Asked before the generic call, which wraps the handler in a thunk (an allocation) even
    // when it then has nothing to post.
    if releasesOnLoopThread, !owner.isCurrent {
      owner.releaseOnOwnThread(consume handler)
    } else {
      LoopTimer.release(handler)
    }
  }

  /// Ends the handler's lifetime here, after the caller's last lock is released.
  private static func release(_ handler: consuming Handler?) {}

  /// Binds the timer to `loop` and reads its schedule in one hold of `binding.lock`; the
  /// caller holds the loop's lock. Returns whether this call made the binding, as `bind(to:)`.
  func bindReadingSchedule(
    to loop: Loop
  ) throws(LoopError) -> (newlyBound: Bool, fireDate: LoopClock.Instant, tolerance: Int64) {
    try binding.lock.withLock { () throws(LoopError) in try bindUnlocked(to: loop) }
  }

  /// Binds and reads the schedule; the caller holds `binding.lock`, or the timer is fresh.
  /// The first bind settles a pending delay: a virtual loop counts it from its own now.
  @inline(__always)
  private func bindUnlocked(
    to loop: Loop
  ) throws(LoopError) -> (newlyBound: Bool, fireDate: LoopClock.Instant, tolerance: Int64) {
    let newlyBound =
      bindingState.bindIfFree(to: loop) ? true : try bindingState.bind(to: loop, kind: "LoopTimer")
    if newlyBound, pendingDelay != LoopTimer.noPendingDelay {
      if let clock = loop.virtualClock {
        storedFireDate = clock.now.advanced(by: .nanoseconds(pendingDelay))
      }
      pendingDelay = LoopTimer.noPendingDelay
    }
    return (newlyBound, storedFireDate, storedTolerance)
  }

  /// `bindReadingSchedule(to:)` for a timer its caller made just now on the loop's own
  /// thread (`IsolatedLoop.addTimer`): no other thread can reach it yet, so its lock guards
  /// nothing and is not taken. The caller holds the loop's lock.
  func bindFreshReadingSchedule(
    to loop: Loop
  ) throws(LoopError) -> (newlyBound: Bool, fireDate: LoopClock.Instant, tolerance: Int64) {
    try bindUnlocked(to: loop)
  }

  /// `ItemBinding.bind(to:)` (`LoopItem`).
  func bind(to loop: Loop) throws(LoopError) -> Bool {
    try bindReadingSchedule(to: loop).newlyBound
  }

  /// `ItemBinding.unbind()` (`LoopItem`).
  func unbind() {
    binding.lock.withLock { bindingState.unbind() }
  }

  /// `ItemBinding.owner` (`LoopItem`).
  var owner: Loop? { binding.lock.withLock { bindingState.loop } }

  /// The fire date and the handler if the timer is valid and due at `now`, read in one hold
  /// of `binding.lock`; nil otherwise (and then no copy of the handler is made, which could
  /// otherwise be its last reference and be released under the caller's lock).
  func dueHandler(at now: LoopClock.Instant) -> (fireDate: LoopClock.Instant, handler: Handler)? {
    // Locked by hand for the reason `invalidate()` gives.
    binding.lock.lock()
    defer { binding.lock.unlock() }
    guard bindingState.isValid, storedFireDate <= now, let storedHandler else { return nil }
    fireDateSet = false
    return (storedFireDate, storedHandler)
  }

  /// Fire date and tolerance (in nanoseconds) read together, and whether the fire date was
  /// set since the last callout began; the caller must hold `binding.lock`.
  var scheduleUnlocked: (fireDate: LoopClock.Instant, tolerance: Int64, wasSet: Bool) {
    (storedFireDate, storedTolerance, fireDateSet)
  }

  /// Sets the fire date; the caller must hold `binding.lock`.
  func setFireDateUnlocked(_ date: LoopClock.Instant) { storedFireDate = date }

  /// The fire date after one that has just fired: a date the handler set is honoured (the
  /// setter turns a past date into now, so it is later than the date just fired, or equal on
  /// a virtual clock, which `wasSet` tells apart), otherwise the first point of the original
  /// grid after `now`.
  static func nextFireDate(
    after fired: LoopClock.Instant, current: LoopClock.Instant, interval: Duration,
    now: LoopClock.Instant, wasSet: Bool = false
  ) -> LoopClock.Instant {
    if current > fired || (wasSet && current == fired) { return current }
    let step = max(interval.saturatedNanoseconds, 1)
    if fired.nanoseconds > Int64.max - step { return .distantFuture }
    let behind = now.nanoseconds - fired.nanoseconds
    // Skip every grid point at or before now in one step instead of CF's loop.
    let steps = behind < 0 ? 1 : behind / step + 1
    let (offset, overflow) = steps.multipliedReportingOverflow(by: step)
    if overflow { return .distantFuture }
    return fired.advanced(by: .nanoseconds(offset))
  }
}
