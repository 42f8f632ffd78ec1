/// A loop's time as a Swift `Clock`: `now` is the loop's now and a sleep is one of the loop's
/// timers. Code written against `any Clock<Duration>` (the style swift-clocks made common:
/// inject the clock, never call `ContinuousClock()` inside) takes `loop.clock` in production
/// and `virtual.clock` in a test, and the same code then runs on the loop's timers or in
/// virtual time.
///
/// ```swift
/// func poll(every interval: Duration, on clock: any Clock<Duration>) async throws {
///   while true {
///     try await clock.sleep(for: interval)
///     // …
///   }
/// }
/// ```
///
/// - **`now`** is `Loop.now`: CLOCK_MONOTONIC on a loop of a thread, the virtual now on a
///   `VirtualLoop`'s loop. Instants are `LoopClock.Instant`s, so they compare with the
///   loop's fire dates.
/// - **`sleep(until:tolerance:)`** is `loop.sleep(until:tolerance:)`: a one-shot timer in the
///   loop's common modes resumes the task. A task running on the loop (preferring its
///   executor, or inside `VirtualLoop.runTask`) continues on the loop's thread; on a virtual
///   loop the sleep ends when the clock reaches its deadline, whichever thread asked. Throws
///   `CancellationError` when the task is cancelled, as every `Clock`'s sleep does, and
///   `LoopError.loopTornDown` when the loop's thread has exited.
///
/// Mirrors no CF type (CF has no clock object; its timers read `mach_absolute_time`). Unlike
/// `LoopClock`, whose sleep is `Task.sleep` and whose `now` is always the real clock, this one
/// is bound to one loop.
public struct LoopTimerClock: Clock, Sendable {
  /// The loop whose time this is and whose timers end the sleeps.
  public let loop: Loop

  /// The clock of `loop`; the same as `loop.clock`.
  public init(loop: Loop) { self.loop = loop }

  /// The loop's now (virtual on a `VirtualLoop`).
  public var now: LoopClock.Instant { loop.now }

  /// One nanosecond, the unit of `LoopClock.Instant`.
  public var minimumResolution: Duration { .nanoseconds(1) }

  /// Suspends the task until `deadline` on one of the loop's timers, which may fire up to
  /// `tolerance` late to share a wake-up (nil: none); a deadline already past resumes on the
  /// loop's next pass. See `Loop.sleep(until:tolerance:)`.
  public nonisolated(nonsending) func sleep(
    until deadline: LoopClock.Instant, tolerance: Duration? = nil
  ) async throws {
    try await loop.sleep(until: deadline, tolerance: tolerance)
  }
}

extension Loop {
  /// This loop's time as a Swift `Clock` whose sleeps are this loop's timers: see
  /// `LoopTimerClock`.
  public var clock: LoopTimerClock { LoopTimerClock(loop: self) }
}
