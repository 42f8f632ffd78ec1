import CRunLoopShims
import Glibc

/// A loop whose clock moves only when told: the real `Loop` code — modes, observers, sources,
/// timers, blocks, CFRunLoop's order — run against a virtual clock, so code that uses a loop
/// is tested in microseconds and the same way every time.
///
/// ```swift
/// let virtual = VirtualLoop()
/// let debouncer = Debouncer(on: virtual.loop, delay: .milliseconds(300))
/// debouncer.input("a")
/// virtual.advance(by: .milliseconds(299))   // nothing yet
/// virtual.advance(by: .milliseconds(1))     // fires, with virtual.now == its fire date
/// ```
///
/// - `loop` is an ordinary `Loop`: code written against `Loop` runs on it unchanged. It reads
///   its time from the virtual clock (`Loop.now`), and its wait phase, instead of sleeping,
///   moves the clock to the moment the sleep would have ended. Descriptors are real: the wait
///   looks at them with a zero timeout, and a ready one is handled before any time passes.
/// - **Who runs it**: the thread that calls `advance`, `runUntilIdle`, `step` (or runs
///   `loop` itself) is the loop's thread for as long as the call lasts, and `Loop.current`
///   there answers this loop; the thread's own loop, if it has one, is untouched and answers
///   again afterwards. One thread at a time: a second thread that tries traps. Any thread may
///   post to the loop (`perform`, ports, manual sources) at any time; the work runs on the
///   next call that drives the loop.
/// - **Delays** count from the virtual now: `perform(after:)`, `run(for:)`, `Task.sleep` on
///   `loop.executor`, and a `LoopTimer(after:)` counts its delay from the virtual now when it
///   is first added to this loop (a loop of a thread counts it from the timer's creation, as
///   CF does).
/// - **Runs inside callouts** (a nested `run(in:for:)`) run in virtual time too: their waits
///   move the clock, but no further than the `advance` in progress allows — a run that would
///   have to wait past that traps with a message, as does any run that would sleep for ever.
///   With `autoAdvance`, runs move the clock themselves, to the next timer or their deadline,
///   and still no further than the limit of a `VirtualLoop` call in progress.
///
/// Mirrors no CF type. The counterparts are SwiftNIO's `EmbeddedEventLoop` (a separate
/// implementation with no modes, observers or descriptors), Tokio's paused clock (its
/// auto-advance is `autoAdvance` here) and Android's paused `Looper` under Robolectric.
public final class VirtualLoop: Sendable {
  /// The loop: an ordinary `Loop` whose clock is this one's.
  public let loop: Loop
  let virtualClock: VirtualClock
  /// Says once when the test's timers went to its thread's real loop instead.
  let strayTimers = StrayTimerWatch()
  /// What the stray-timer diagnostic printed to standard error, if it did (for tests).
  package var strayTimerReport: String? { strayTimers.report }

  /// Where a `VirtualLoop()` starts its clock: instant zero.
  public static let defaultStart = LoopClock.Instant(nanoseconds: 0)

  /// - Parameters:
  ///   - start: the instant the clock starts at; trace timestamps count from it.
  ///   - autoAdvance: see `autoAdvance`.
  public init(
    startingAt start: LoopClock.Instant = VirtualLoop.defaultStart, autoAdvance: Bool = false
  ) {
    virtualClock = VirtualClock(start: start, autoAdvance: autoAdvance)
    loop = Loop(thread: pthread_self(), threadID: crl_gettid(), virtualClock: virtualClock)
  }

  /// Does what the loop accepted and has not done yet (on the releasing thread), as a thread's
  /// loop does when its thread exits: runs its blocks and jobs, performs the manual sources
  /// still signalled, delivers its ports' messages (`Loop`'s final drain); then tears the loop
  /// down: items are invalidated, descriptors closed, and later posts throw `loopTornDown`. A
  /// test that leaves a source signalled sees it performed here, after its last call.
  deinit {
    virtualClock.driving(loop) { loop.runAcceptedWorkBeforeExit() }
    loop.tearDown()
  }

  /// The virtual clock's current instant.
  public var now: LoopClock.Instant { virtualClock.now }

  /// The virtual time as a Swift `Clock`: `now` is the virtual now, and a sleep suspends on
  /// one of the loop's timers, ended when the clock reaches it (`loop.clock`; see
  /// `LoopTimerClock`). Give it to code that takes `any Clock<Duration>`.
  public var clock: LoopTimerClock { loop.clock }

  /// Under auto-advance a run that would sleep moves the clock to the next timer of its mode
  /// (or its deadline) instead of trapping, so an unmodified program that calls
  /// `run(in:for:)` or `run()` goes through an hour of timers in milliseconds. A run with
  /// neither a timer nor a deadline ahead still traps: nothing would ever end its sleep.
  /// Inside a call of this type (a run nested in a callout during `advance(to:)`, `step()`,
  /// `runUntilIdle()` or `runUntil`) a run moves the clock no further than that call's limit
  /// (its target, the step's next due date, now), and traps, saying so, if it would have to:
  /// the call promised where the clock is when it returns. Off by default: then only
  /// `advance`, `step` and `runTask` move the clock. Settable at any time.
  public var autoAdvance: Bool {
    get { virtualClock.autoAdvance.load(ordering: .relaxed) }
    set { virtualClock.autoAdvance.store(newValue, ordering: .relaxed) }
  }

  /// `advance(to: now + duration, in: mode)`; a negative duration counts as zero.
  public func advance(by duration: Duration, in mode: Loop.Mode = .default) {
    advance(to: now.advanced(by: max(duration, .zero)), in: mode)
  }

  /// Runs `mode` while moving the clock from due time to due time up to `target`: each timer
  /// fires in deadline order with `now` equal to its fire date (a timer with a tolerance at the
  /// end of its window, where a real loop wakes for it too, with the timers due by then),
  /// repeating timers re-arm from there, and blocks, sources and ready descriptors are
  /// handled as they come. Then runs what is left at `target` until idle (`runUntilIdle`):
  /// afterwards `now == target`.
  ///
  /// Each step of the clock is a pass of the real loop, with the observers told as a
  /// sleeping loop tells them. A target at or before `now` moves nothing and only runs the
  /// loop until idle. Timers of other modes do not fire (the loop does not run them), but
  /// their time passes as it would. Called from one of the loop's own callouts, it may not
  /// move the clock past the target of the call in progress (that traps).
  public func advance(to target: LoopClock.Instant, in mode: Loop.Mode = .default) {
    Loop.requireRunnable(mode, for: "VirtualLoop.advance")
    let work = loop.workDone
    virtualClock.driving(loop, horizon: max(target, now)) {
      while now < target {
        let (start, work) = (now, loop.workDone)
        let result = loop.runMode(mode, until: target, returnAfterSourceHandled: false)
        // An empty mode returns at once: nothing of it can happen before the target. A run
        // that a callout stops before it does anything (an entry observer that stops every
        // run) cannot get there either; time passes all the same.
        let stuck = result == .stopped && now == start && loop.workDone == work
        if result == .finished || stuck { virtualClock.move(to: target) }
      }
      runUntilIdleWhileDriving(mode)
    }
    if loop.workDone == work { strayTimers.callDidNothing("advance") }
  }

  /// Runs blocks, signalled manual sources, ready descriptors and timers due now, pass after
  /// pass, until a pass finds none left; the clock does not move. A loop that keeps making
  /// work for itself (a block that posts itself) never becomes idle, as on a real loop.
  public func runUntilIdle(in mode: Loop.Mode = .default) {
    Loop.requireRunnable(mode, for: "VirtualLoop.runUntilIdle")
    let work = loop.workDone
    virtualClock.driving(loop, horizon: now) { runUntilIdleWhileDriving(mode) }
    if loop.workDone == work { strayTimers.callDidNothing("runUntilIdle") }
  }

  /// Makes exactly one pass of the loop in `mode` and reports it. When the pass would sleep
  /// (nothing ready to handle), the clock moves to the mode's next timer, as a real loop
  /// would sleep until it; with no timer ahead the pass only looks and returns.
  @discardableResult
  public func step(in mode: Loop.Mode = .default) -> Pass {
    Loop.requireRunnable(mode, for: "VirtualLoop.step")
    return virtualClock.driving(loop) {
      let (start, work) = (now, loop.workDone)
      let until = max(loop.virtualWakeDeadline(in: mode) ?? start, start)
      let (tracer, ownTracer) = loop.tracerForStep()
      let mark = tracer.recordedCount
      let result = virtualClock.driving(loop, horizon: until) {
        loop.runMode(mode, until: until, returnAfterSourceHandled: false, onePass: true)
      }
      let events = tracer.events(recordedSince: mark)
      if ownTracer { tracer.detach() }
      if now == start && loop.workDone == work { strayTimers.callDidNothing("step") }
      return Pass(
        mode: mode, result: result, start: start, end: now, events: events,
        origin: virtualClock.start)
    }
  }

  /// Runs `body` now on the calling thread as the loop's thread, without a pass: inside it
  /// `Loop.current` answers `loop` and `loop.assumeIsolated()` holds, as in the loop's own
  /// callouts. For code under test that finds its loop through `Loop.current`. The clock does
  /// not move; work the body posts runs on the next `advance`, `runUntilIdle` or `step`.
  public func asCurrent<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
    try virtualClock.driving(loop, body)
  }

  /// Runs the loop until idle, over and over, until `condition` holds; returns whether it
  /// does. While it does not and the loop is idle, waits in real time — at most `limit`
  /// in all — for what other threads bring. The clock does not move: use it after `advance`
  /// to let tasks finish what the advance started (a task that resumes from `Task.sleep` on
  /// `loop.executor` passes through Swift's global executor on its way back).
  ///
  /// What ends a wait at once: a block or executor job posted to the loop, a port message, a
  /// ready descriptor, a manual source signalled and woken (or signalled before it joins the
  /// mode), and a timer another thread adds or moves to a date already due (`perform(after:
  /// .zero)`, `loop.sleep(for: .zero)`), which then fires. A condition another thread makes
  /// true without handing the loop anything is noticed too: the wait looks at `condition`
  /// every `conditionInterval` (1 ms), without a pass.
  ///
  /// It blocks its thread while it waits. In async code use the `async` overload, which
  /// waits without holding one of Swift's cooperative threads: the task it waits for may
  /// need that thread to get back to the loop.
  @discardableResult
  public func runUntil(
    _ condition: () -> Bool, waitingAtMost limit: Duration = .seconds(10),
    in mode: Loop.Mode = .default
  ) -> Bool {
    Loop.requireRunnable(mode, for: "VirtualLoop.runUntil")
    let giveUp = LoopClock.Instant.now.advanced(by: limit)
    return virtualClock.driving(loop, horizon: now) {
      while true {
        runUntilIdleWhileDriving(mode)
        if condition() { return true }
        // Until something comes (then the loop runs again) or the limit; the condition is
        // looked at between short waits.
        while true {
          let realNow = LoopClock.Instant.now
          if realNow >= giveUp { return false }
          let until = min(giveUp, realNow.advanced(by: VirtualLoop.conditionInterval))
          if loop.waitForOutsideWork(in: mode, until: until) { break }
          if condition() { return true }
        }
      }
    }
  }

  /// How often `runUntil` looks at its condition while nothing comes from other threads.
  static let conditionInterval = Duration.milliseconds(1)

  /// `runUntil` for async code: between looks it suspends (for 100 µs of real time) instead
  /// of blocking its thread, so the work it waits for can use the thread meanwhile.
  @discardableResult
  public func runUntil(
    _ condition: () -> Bool, waitingAtMost limit: Duration = .seconds(10),
    in mode: Loop.Mode = .default
  ) async -> Bool {
    Loop.requireRunnable(mode, for: "VirtualLoop.runUntil")
    let giveUp = LoopClock.Instant.now.advanced(by: limit)
    while true {
      runUntilIdle(in: mode)
      if condition() { return true }
      if LoopClock.Instant.now >= giveUp { return false }
      try? await Task.sleep(for: .microseconds(100))
    }
  }

  private func runUntilIdleWhileDriving(_ mode: Loop.Mode) {
    while true {
      let before = loop.workDone
      _ = loop.runMode(mode, until: now, returnAfterSourceHandled: false)
      if loop.workDone == before && !loop.hasBlocks(for: mode) { return }
    }
  }
}
