import Glibc
import Synchronization

/// Tells a test, once, that its timers went to the wrong loop. Code that finds its loop
/// through `Loop.current` and is set up outside `virtual.asCurrent { … }` (or `runTask`)
/// schedules its timers and delayed blocks on the test thread's *real* loop, which nobody
/// runs: `advance` then finds nothing to do, and nothing would say why.
///
/// When a `VirtualLoop` call that moves or runs the loop (`advance`, `runUntilIdle`, `step`)
/// did nothing at all, and the driving thread's real loop was given timers since the
/// `VirtualLoop` was made, this prints what happened and what to call instead, to standard
/// error, once per `VirtualLoop`.
final class StrayTimerWatch: Sendable {
  private struct State {
    /// For each real loop looked at, how many timers it had been given by then: the loop of
    /// the thread that made the `VirtualLoop`, from when it was made; the loop of another
    /// driving thread (an async test resumes on several), from the first call that did
    /// nothing there, which therefore says nothing.
    /// Held, so that a loop freed and another made at its address is never taken for it.
    var baselines: [(loop: Loop, timers: UInt64)] = []
    /// The thread that made the `VirtualLoop`: a loop of its made later starts from zero.
    let creator = pthread_self()
    var told = false
    var report: String?
  }

  private let state: Mutex<State>

  /// Call on the thread making the `VirtualLoop`.
  init() {
    var state = State()
    if let real = LoopRegistry.shared.existingLoop() {
      state.baselines.append((real, real.timersBoundCount))
    }
    self.state = Mutex(state)
  }

  /// What was printed, if anything (for tests).
  var report: String? { state.withLock { $0.report } }

  /// After a call named `call` that did no work, on the driving thread.
  func callDidNothing(_ call: @autoclosure () -> String) {
    // The thread's own loop, not the virtual one that `Loop.current` answers while driving.
    guard let real = LoopRegistry.shared.existingLoop() else { return }
    let timers = real.timersBoundCount
    let stray = state.withLock { state -> UInt64? in
      guard !state.told else { return nil }
      var before = state.baselines.first { $0.loop === real }?.timers
      if before == nil && pthread_equal(real.thread, state.creator) != 0 { before = 0 }
      guard let before else {
        state.baselines.append((real, timers))
        return nil
      }
      guard timers > before else { return nil }
      state.told = true
      return timers - before
    }
    guard let stray else { return }
    let message =
      "RunLoopKit: VirtualLoop.\(call()) found nothing to run on the virtual loop, but the "
      + "real loop of this thread (\(ThreadName.current)) was given \(stray) timer(s) or "
      + "delayed block(s) since the VirtualLoop was made. Code that finds its loop through "
      + "Loop.current was probably set up outside virtual.asCurrent { … }: its timers went "
      + "to the thread's own loop, which nothing runs and the virtual clock does not move. "
      + "Set it up inside virtual.asCurrent { … } or virtual.runTask { … }, or give it "
      + "virtual.loop. (Said once per VirtualLoop.)\n"
    state.withLock { $0.report = message }
    Syscall.writeToStandardError(message)
  }
}

extension Loop {
  /// `timersBound`, read under the lock.
  var timersBoundCount: UInt64 { lock.withLock { timersBound } }
}
