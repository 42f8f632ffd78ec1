/// Fires a handler at a given instant, once or on a fixed grid. Mirrors `CFRunLoopTimer`.
///
/// - A one-shot timer (interval `nil`) fires once and is then invalid.
/// - A repeating timer that falls behind fires once, and its next fire date stays on the
///   original grid (the first grid point after now), exactly as CF does.
/// - A handler that sets `fireDate` later than the date just fired moves the timer there;
///   setting an earlier date from inside the handler is ignored for that round (CF's rule).
/// - `tolerance` lets the loop fire this timer late by up to that much so several timers can
///   share one wake; a timer never fires before its fire date.
///
/// Differences from CF: times are `LoopClock` instants and `Duration`s rather than
/// CFAbsoluteTime; a bad interval or tolerance throws instead of being clamped; a timer added
/// to a second loop throws instead of being ignored.
public final class LoopTimer: @unchecked Sendable {  // state under binding.lock / the loop lock
  /// `nil` for a one-shot timer.
  public let interval: Duration?
  /// A name for traces and `debugDescription`; the loop does not use it otherwise.
  public let label: String?
  public let order: Int
  typealias Handler = @Sendable (LoopTimer) -> Void
  let binding = ItemBinding(kind: "LoopTimer")
  /// Guarded by `binding.lock`; nil once the timer is invalid (a one-shot timer that fired
  /// included), so nothing it captured outlives it: CFRunLoopTimerInvalidate releases the
  /// timer's context the same way.
  private var storedHandler: Handler?
  /// Breaks ties between equal fire dates: earlier-created timers first.
  let sequence = SignalClock.next()

  /// Guarded by `binding.lock`.
  private var storedFireDate: LoopClock.Instant
  /// Guarded by `binding.lock`.
  private var storedTolerance: Duration

  /// Where this timer sits in each mode's heap. Guarded by the owner loop's lock.
  var slots = TimerSlots()
  /// Guarded by the owner loop's lock.
  var isFiring = false

  /// - Parameters:
  ///   - label: a name for traces and `debugDescription`.
  ///   - fireDate: when to fire first.
  ///   - interval: the repeat interval, or `nil` for a one-shot timer; must be positive.
  ///   - tolerance: how late the loop may fire it to coalesce wakes; must not be negative.
  ///   - order: kept for parity with CF, which ignores a timer's order too: timers due
  ///     together fire by fire date, then in the order they were created.
  ///   - handler: called on the loop's thread each time the timer fires.
  public init(
    label: String? = nil,
    fireAt fireDate: LoopClock.Instant,
    interval: Duration? = nil,
    tolerance: Duration = .zero,
    order: Int = 0,
    handler: @escaping @Sendable (LoopTimer) -> Void
  ) throws(LoopError) {
    if let interval, interval <= .zero {
      throw .invalidInterval(name: "timer interval", value: "\(interval)")
    }
    if tolerance < .zero {
      throw .invalidInterval(name: "timer tolerance", value: "\(tolerance)")
    }
    self.interval = interval
    self.label = label
    self.order = order
    self.storedHandler = handler
    self.storedFireDate = fireDate
    self.storedTolerance = tolerance
  }

  /// A timer that first fires `delay` from now.
  public convenience init(
    label: String? = nil,
    after delay: Duration,
    repeating interval: Duration? = nil,
    tolerance: Duration = .zero,
    order: Int = 0,
    handler: @escaping @Sendable (LoopTimer) -> Void
  ) throws(LoopError) {
    try self.init(
      label: label, fireAt: .now.advanced(by: delay), interval: interval, tolerance: tolerance,
      order: order, handler: handler)
  }

  /// CF-style construction from seconds (`CFTimeInterval`): rejects NaN, infinite and
  /// negative values with an error naming the value, instead of CF's silent clamping.
  public convenience init(
    label: String? = nil,
    afterSeconds delay: Double,
    repeatingEverySeconds interval: Double? = nil,
    toleranceSeconds tolerance: Double = 0,
    order: Int = 0,
    handler: @escaping @Sendable (LoopTimer) -> Void
  ) throws(LoopError) {
    try self.init(
      label: label, after: LoopTimer.duration("timer delay", delay, allowZero: true),
      repeating: try interval.map { s throws(LoopError) in
        try LoopTimer.duration("timer interval", s, allowZero: false)
      },
      tolerance: LoopTimer.duration("timer tolerance", tolerance, allowZero: true),
      order: order, handler: handler)
  }

  private static func duration(
    _ name: String, _ seconds: Double, allowZero: Bool
  ) throws(LoopError) -> Duration {
    guard seconds.isFinite, seconds > 0 || (allowZero && seconds == 0) else {
      throw .invalidInterval(name: name, value: "\(seconds) s")
    }
    // Beyond ~292 years a nanosecond count no longer fits; such a timer never fires anyway.
    return seconds >= 9.2e9 ? .seconds(Int64(9.2e9)) : .nanoseconds(Int64(seconds * 1e9))
  }

  /// The next time the timer fires. Settable from any thread, including its own handler.
  public var fireDate: LoopClock.Instant {
    get { binding.lock.withLock { storedFireDate } }
    set {
      let owner = binding.lock.withLock { () -> Loop? in
        if let loop = binding.ownerUnlocked { return loop }
        storedFireDate = newValue
        return nil
      }
      owner?.reschedule(self) { storedFireDate = newValue }
    }
  }

  /// How late the timer may fire to share a wake with others. Negative values become zero.
  public var tolerance: Duration {
    get { binding.lock.withLock { storedTolerance } }
    set {
      let value = max(newValue, .zero)
      let owner = binding.lock.withLock { () -> Loop? in
        if let loop = binding.ownerUnlocked { return loop }
        storedTolerance = value
        return nil
      }
      owner?.reschedule(self) { storedTolerance = value }
    }
  }

  public var isValid: Bool { binding.isValid }

  /// Stops the timer for good and removes it from every mode, then releases its handler and
  /// whatever the handler captured. Safe from any thread, including its own handler (whose
  /// call finishes).
  public func invalidate() {
    invalidateReleasing { storedHandler.take() }
  }

  /// The fire date and the handler if the timer is valid and due at `now`, read in one hold
  /// of `binding.lock`; nil otherwise (and then no copy of the handler is made, which could
  /// otherwise be its last reference and be released under the caller's lock).
  func dueHandler(at now: LoopClock.Instant) -> (fireDate: LoopClock.Instant, handler: Handler)? {
    binding.whileValid {
      guard storedFireDate <= now, let storedHandler else { return nil }
      return (storedFireDate, storedHandler)
    }
  }

  /// Fire date and tolerance read together; the caller must hold `binding.lock`.
  var scheduleUnlocked: (fireDate: LoopClock.Instant, tolerance: Duration) {
    (storedFireDate, storedTolerance)
  }

  /// Sets the fire date; the caller must hold `binding.lock`.
  func setFireDateUnlocked(_ date: LoopClock.Instant) { storedFireDate = date }

  /// The fire date after one that has just fired: a later date the handler set is honoured,
  /// otherwise the first point of the original grid after `now`.
  static func nextFireDate(
    after fired: LoopClock.Instant, current: LoopClock.Instant, interval: Duration,
    now: LoopClock.Instant
  ) -> LoopClock.Instant {
    if current > fired { return current }
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
