import CRunLoopShims

/// The monotonic clock every RunLoopKit deadline is measured on: CLOCK_MONOTONIC, the same
/// clock the mode timerfds are armed on, so a fire date means the same instant to Swift and
/// to the kernel.
///
/// Mirrors CFRunLoop's use of `mach_absolute_time` (CFAbsoluteTime appears only at the API
/// edge there); unlike CF there is no wall-clock conversion: fire dates never jump when the
/// system time is changed.
public struct LoopClock: Clock, Sendable {
  /// A point on CLOCK_MONOTONIC, in nanoseconds since an unspecified boot-time origin.
  public struct Instant: InstantProtocol, Hashable, Sendable, CustomStringConvertible {
    /// Nanoseconds since the clock's origin, as `clock_gettime(CLOCK_MONOTONIC)` reports them.
    public var nanoseconds: Int64

    /// The instant `nanoseconds` after the clock's origin.
    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    /// Later than any instant a program will reach; arithmetic saturates there.
    public static let distantFuture = Instant(nanoseconds: .max)

    /// The current instant, read from CLOCK_MONOTONIC.
    public static var now: Instant { Instant(nanoseconds: crl_monotonic_now_ns()) }

    /// `base` (by default now) plus `delay`, a negative delay counting as zero: the one rule
    /// every delay in RunLoopKit follows (timers, delayed blocks, run durations).
    static func after(_ delay: Duration, from base: Instant = .now) -> Instant {
      base.advanced(by: max(delay, .zero))
    }

    /// The instant `duration` later (earlier when negative); saturates instead of overflowing.
    public func advanced(by duration: Duration) -> Instant {
      advanced(nanoseconds: duration.saturatedNanoseconds)
    }

    /// `advanced(by:)` for a count of nanoseconds already at hand; saturates likewise.
    func advanced(nanoseconds delta: Int64) -> Instant {
      let (sum, overflow) = nanoseconds.addingReportingOverflow(delta)
      if overflow { return Instant(nanoseconds: delta > 0 ? .max : .min) }
      return Instant(nanoseconds: sum)
    }

    /// The time from this instant to `other`; negative when `other` is earlier.
    public func duration(to other: Instant) -> Duration {
      .nanoseconds(other.nanoseconds &- nanoseconds)
    }

    /// Whether `lhs` comes before `rhs`.
    public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.nanoseconds < rhs.nanoseconds }

    /// The raw nanoseconds and how far the instant lies from now, for logs.
    public var description: String {
      let delta = Instant.now.duration(to: self)
      return "monotonic \(nanoseconds) ns (now \(delta >= .zero ? "+" : "")\(delta))"
    }
  }

  /// The clock. Every value reads the same CLOCK_MONOTONIC.
  public init() {}

  /// The current instant (`Instant.now`).
  public var now: Instant { .now }

  /// The current instant, `LoopClock.now`, as `ContinuousClock.now` reads.
  public static var now: Instant { .now }

  /// One nanosecond, the unit of `Instant`.
  public var minimumResolution: Duration { .nanoseconds(1) }

  /// Suspends the task until `deadline` with `Task.sleep(for:)`, ignoring `tolerance`; returns
  /// at once for a deadline already passed. Throws `CancellationError` if the task is cancelled.
  public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
    let remaining = Instant.now.duration(to: deadline)
    if remaining > .zero { try await Task.sleep(for: remaining) }
  }
}

extension Duration {
  /// Whole nanoseconds, clamped to Int64 so arithmetic on huge durations saturates.
  var saturatedNanoseconds: Int64 {
    let (seconds, attoseconds) = components
    let limit = Int64.max / 1_000_000_000
    if seconds >= limit { return .max }
    if seconds <= -limit { return .min }
    return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
  }
}
