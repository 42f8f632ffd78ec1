import Synchronization

/// One `loop.sleep`: the suspended task's continuation and the one-shot timer that resumes it.
/// Whichever comes first, the timer's callout on the loop's thread or the task's cancellation
/// on any thread, takes the continuation under the mutex and resumes it; the other finds
/// nothing to take. Cancellation invalidates the timer there and then, so the loop's mode
/// stops counting it before `CancellationError` reaches the task.
final class LoopSleep: Sendable {
  private enum State {
    case starting
    case waiting(UnsafeContinuation<Void, any Error>, LoopTimer)
    case cancelledEarly
    case ended
  }

  private let state = Mutex(State.starting)

  /// Adds the sleep's timer to the loop's common modes (so a nested run in a private mode
  /// does not hold the task back). Resumes at once, throwing, when the task was cancelled
  /// already or the timer cannot be made or added.
  func begin(
    _ continuation: UnsafeContinuation<Void, any Error>, on loop: Loop,
    until deadline: LoopClock.Instant, tolerance: Duration
  ) {
    let timer: LoopTimer
    do {
      let end = End(sleep: self, loop: loop)
      timer = try LoopTimer(
        label: "loop.sleep", firstFireAt: deadline, tolerance: tolerance, endsSleep: true
      ) { _ in end.sleep.resume(throwing: nil) }
    } catch {
      continuation.resume(throwing: error)
      return
    }
    let cancelled = state.withLock { state -> Bool in
      guard case .starting = state else { return true }
      state = .waiting(continuation, timer)
      return false
    }
    if cancelled {
      continuation.resume(throwing: CancellationError())
      return
    }
    do {
      try loop.add(timer, to: .common)
    } catch {
      resume(throwing: error)
      timer.invalidate()
    }
  }

  /// Held only by the timer's handler, which the timer lets go of when it is invalidated:
  /// after it fired, when the sleep was cancelled, or when its loop's thread exits (a
  /// resident thread stopped) before it fired. In that last case nothing else would ever
  /// resume the task, so it resumes throwing `LoopError.loopTornDown`: the loop ends its
  /// sleeps before its final drain (`endSleepsBeforeExit`), so a task running on the loop
  /// itself (a pinned actor) still gets to run and see the error.
  private final class End: Sendable {
    let sleep: LoopSleep
    /// For the error's message only. (Strong: the loop → timer → handler → here cycle ends
    /// whenever the timer is invalidated, which always happens.)
    let loop: Loop

    init(sleep: LoopSleep, loop: Loop) {
      self.sleep = sleep
      self.loop = loop
    }

    deinit {
      // The error is made only when it is needed: building its message allocates.
      sleep.resume { LoopError.loopTornDown(thread: loop.threadDescription) }
    }
  }

  /// The task was cancelled: the timer goes now, and the task resumes throwing
  /// `CancellationError`; before `begin`, the sleep ends as soon as it starts. The
  /// continuation is taken before the timer is invalidated: invalidating lets go of the
  /// handler, whose `End` would otherwise resume the task as if the loop had gone.
  func cancel() {
    let taken = state.withLock { state -> (UnsafeContinuation<Void, any Error>, LoopTimer)? in
      switch state {
      case .starting:
        state = .cancelledEarly
        return nil
      case .waiting(let continuation, let timer):
        state = .ended
        return (continuation, timer)
      case .cancelledEarly, .ended: return nil
      }
    }
    guard let (continuation, timer) = taken else { return }
    timer.invalidate()
    continuation.resume(throwing: CancellationError())
  }

  /// Resumes the task once: normally (`nil`, the timer fired) or throwing.
  fileprivate func resume(throwing error: (any Error)?) {
    resume { error }
  }

  /// Resumes the task once, throwing what `error` makes unless it makes nil; `error` is
  /// called only if the task is still waiting.
  private func resume(_ error: () -> (any Error)?) {
    let continuation = state.withLock { state -> UnsafeContinuation<Void, any Error>? in
      guard case .waiting(let continuation, _) = state else { return nil }
      state = .ended
      return continuation
    }
    guard let continuation else { return }
    if let error = error() { continuation.resume(throwing: error) } else { continuation.resume() }
  }
}
