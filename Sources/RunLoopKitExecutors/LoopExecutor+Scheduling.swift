import Dispatch
import RunLoopKit
// Experimental toolchain interface: `SchedulingExecutor`, behind
// `@_spi(ExperimentalScheduling)` in `_Concurrency`. Its proposal, SE-0505, was returned for
// revision (2026-02-12); the revised shape (`enqueue(_:run:clock:tolerance:onCancellation:)`
// returning a `JobCancellationToken`, and `cancel(jobWithToken:)`) changes this interface.
// Checked on Swift 6.3.1 (swift-6.3.1-RELEASE, x86_64 Linux). LoopMainExecutor.swift forwards
// to it. `Loop.sleep` (RunLoopKit) needs none of it.
@_spi(ExperimentalScheduling) import _Concurrency

/// `Task.sleep` on the loop's own timers.
///
/// When a task prefers a loop's executor (`withTaskExecutorPreference(loop.executor)`), the
/// runtime hands a `Task.sleep` to that executor's `enqueue(_:after:tolerance:clock:)` instead of
/// a Dispatch timer. The loop turns it into a one-shot `LoopTimer` in its common modes, fired
/// on the loop's thread, and the task resumes there. (Swift 6.3.1's runtime passes the
/// resumption through one job on the default executor on the way back; `Loop.sleep` does not.)
///
/// Clocks: any clock whose `Duration` is `Swift.Duration` (`ContinuousClock`,
/// `SuspendingClock`, `LoopClock`); the delay is counted on CLOCK_MONOTONIC (the loop's
/// clock), so time a suspended machine spends asleep is not counted — as with
/// `SuspendingClock`. A clock with another `Duration` type cannot be converted and traps with
/// a message.
///
/// On a `VirtualLoop`'s executor the delay counts from the virtual now, rounded up to a whole
/// millisecond (see `enqueue(_:after:tolerance:clock:)`).
@_spi(ExperimentalScheduling) extension LoopExecutor: SchedulingExecutor {
  /// `Task.sleep` calls this one; the protocol's default `enqueue(_:at:tolerance:clock:)`
  /// converts a deadline into a delay on `clock` and calls it too.
  public func enqueue<C: Clock>(
    _ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C
  ) {
    guard let delay = delay as? Duration else {
      fatalError(
        "RunLoopKit: Task.sleep on a loop executor needs a clock measured in Swift.Duration; "
          + "\(C.self) uses \(C.Duration.self). Sleep on ContinuousClock or SuspendingClock.")
    }
    let leeway = (tolerance as? Duration).map { max($0, .zero) } ?? .zero
    // The runtime turns `Task.sleep(for:)` into a deadline on the task's clock and back into
    // a delay here, losing the real microseconds that passed in between. A virtual loop
    // counts the delay from its virtual now, so it rounds it up to a whole millisecond:
    // the sleep lasts what was asked (never less), the same on every run.
    let counted = loop.isVirtual ? delay.roundedUpToMilliseconds : delay
    schedule(UnownedJob(job), after: counted, tolerance: leeway)
  }

  private func schedule(_ job: UnownedJob, after delay: Duration, tolerance: Duration) {
    let pending = PendingSleep(job: job, executor: self)
    do throws(LoopError) {
      let timer = try LoopTimer(
        label: "Task.sleep", after: max(delay, .zero), tolerance: tolerance
      ) { _ in pending.fire() }
      try loop.add(timer, to: .common)
    } catch .loopTornDown {
      fatalError(
        "RunLoopKit: a Task.sleep was scheduled on \(loop) after its thread exited. Keep the "
          + "thread alive for as long as tasks sleep on its executor.")
    } catch {
      // No timer for it (the process is out of descriptors for the mode's timerfd or epoll
      // set): the sleep is timed by Dispatch instead and still resumes on the loop's thread.
      DispatchQueue.global().asyncAfter(deadline: .now() + delay.dispatchInterval) {
        self.resume(pending)
      }
    }
  }

  /// Runs a sleep timed elsewhere on the loop's thread.
  private func resume(_ pending: PendingSleep) {
    do throws(LoopError) {
      try loop.perform { pending.fire() }
    } catch {
      fatalError(
        "RunLoopKit: a Task.sleep on \(loop) ended after its thread exited. Keep the thread "
          + "alive for as long as tasks sleep on its executor.")
    }
  }
}

extension Duration {
  /// The next whole millisecond at or above this duration (zero for a negative one).
  fileprivate var roundedUpToMilliseconds: Duration {
    let (seconds, attoseconds) = max(self, .zero).components
    let perMillisecond: Int64 = 1_000_000_000_000_000
    let milliseconds = (attoseconds + perMillisecond - 1) / perMillisecond
    return .seconds(seconds) + .milliseconds(milliseconds)
  }

  /// Whole nanoseconds, at least zero, for Dispatch.
  fileprivate var dispatchInterval: DispatchTimeInterval {
    let (seconds, attoseconds) = max(self, .zero).components
    return .nanoseconds(
      Int(min(seconds, Int64(Int.max / 1_000_000_000) - 1)) * 1_000_000_000
        + Int(attoseconds / 1_000_000_000))
  }
}
