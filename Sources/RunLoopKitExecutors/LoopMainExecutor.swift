import CRunLoopShims
import RunLoopKit
import Synchronization
// Experimental toolchain interface: `MainExecutor` / `RunLoopExecutor`, behind
// `@_spi(ExperimentalCustomExecutors)` in `_Concurrency` (SE-0505's companion; SE-0505 was
// returned for revision on 2026-02-12).
// Checked on Swift 6.3.1 (swift-6.3.1-RELEASE, x86_64 Linux).
@_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency

/// The main actor's executor when a program opts in with `LoopExecutorFactory`: `@MainActor`
/// jobs are `Loop.main` perform blocks in its common modes, and the runtime's main loop is
/// `Loop.main.run()`.
///
/// `Loop.main` goes on serving `DispatchQueue.main` as well (see `Loop.main`): blocks sent to
/// the main queue and jobs sent to the main actor share the main thread, and both wait while a
/// nested run is in a mode outside the common set.
///
/// Mirrors what CFRunLoop is on Darwin — the run loop that drives the main thread — made
/// explicit: the runtime asks this executor to run, rather than draining the main queue itself.
public final class LoopMainExecutor: SerialExecutor, Sendable {
  /// The executor the factory installs; the runtime holds on to it for the program's life.
  public static let shared = LoopMainExecutor()

  /// `Loop.main`'s own executor, so an actor pinned to `Loop.main.executor` and the main actor
  /// share one queue and one isolation check.
  let loopExecutor: LoopExecutor
  /// Counts the `runUntil` calls under way, which want the loop back after each job.
  private let untilDepth = Atomic<Int>(0)
  /// Set by `stop()`, taken by `run()`: only this executor's own stop ends its run.
  private let stopRequested = Atomic<Bool>(false)

  private init() { loopExecutor = Loop.main.executor }

  // MARK: RunLoopExecutor

  /// Runs `Loop.main` in its default mode until this executor's `stop()`. The runtime calls
  /// this on the main thread once the program's main task has been enqueued; an `async` main
  /// ends the program with `exit` when it returns, so this need not return.
  ///
  /// A `Loop.main.stop()` from anywhere else (a callback, `DispatchQueue.main.async { … }`)
  /// ends only that one run of the loop: this one runs it again, so the program goes on until
  /// `main` returns, as it would under Dispatch's `dispatchMain()`.
  public func run() throws {
    requireMainThread("run()")
    while !stopRequested.exchange(false, ordering: .acquiringAndReleasing) {
      Loop.main.run()
    }
  }

  /// Runs `Loop.main` until `condition` holds, checking it before the first pass and after
  /// every main-actor job (a loop callback that changes what `condition` reads should be
  /// followed by a main-actor job or a `stop()` to have it seen).
  public func runUntil(_ condition: () -> Bool) throws {
    requireMainThread("runUntil(_:)")
    untilDepth.add(1, ordering: .relaxed)
    defer { untilDepth.subtract(1, ordering: .relaxed) }
    while !condition() { Loop.main.run(in: .default) }
    // A stop made while this ran was a nudge for it, not a stop for a later `run()`.
    stopRequested.store(false, ordering: .releasing)
  }

  /// Ends `run()`, or makes a `runUntil` look at its condition again (and is then used up).
  /// Safe from any thread.
  /// Remembered until `run()` sees it and queued as a block, so unlike `Loop.stop()` a stop
  /// made just before the loop starts running is not lost: it ends the run that follows.
  public func stop() {
    stopRequested.store(true, ordering: .releasing)
    try? Loop.main.perform { Loop.main.stop() }
  }

  // MARK: SerialExecutor

  /// Queues the job on `Loop.main` like a perform block in its common modes, so it runs on
  /// the main thread, never inside another job of `Loop.main` (a nested run inside a
  /// main-actor job runs no other main-actor job: see `LoopExecutor`); while a `runUntil` is
  /// under way, each job then stops the run so the condition is checked again. Traps once
  /// the main loop is torn down.
  public func enqueue(_ job: consuming ExecutorJob) {
    let unowned = UnownedJob(job)
    let serial = asUnownedSerialExecutor()
    do throws(LoopError) {
      try Loop.main.enqueueJob {
        unowned.runSynchronously(on: serial)
        // A runUntil is waiting for some job to make its condition true: give it a look.
        if self.untilDepth.load(ordering: .relaxed) > 0 { Loop.main.stop() }
      }
    } catch {
      fatalError(
        "RunLoopKit: a main-actor job was enqueued after the main thread's loop was torn down (\(error))."
      )
    }
  }

  /// This executor as an `UnownedSerialExecutor`, for the main actor.
  public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
    UnownedSerialExecutor(ordinary: self)
  }

  /// Traps unless called on the main thread, with `Loop.main.executor`'s own check.
  public func checkIsolated() { loopExecutor.checkIsolated() }

  /// True on the main thread; nil elsewhere, so that `MainActor.assumeIsolated` off the main
  /// thread traps through `checkIsolated`, whose message names both threads (see
  /// `LoopExecutor.isIsolatingCurrentContext`).
  public func isIsolatingCurrentContext() -> Bool? { Loop.main.isCurrent ? true : nil }

  private func requireMainThread(_ what: String) {
    precondition(
      crl_is_main_thread() != 0,
      "LoopMainExecutor.\(what) was called off the main thread; only the Swift runtime (or "
        + "code on the main thread) runs the main executor.")
  }
}

@_spi(ExperimentalCustomExecutors) extension LoopMainExecutor: MainExecutor {}

/// A sleep that prefers the main executor is timed by `Loop.main`'s timers.
@_spi(ExperimentalScheduling) extension LoopMainExecutor: SchedulingExecutor {
  public func enqueue<C: Clock>(
    _ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C
  ) {
    loopExecutor.enqueue(job, after: delay, tolerance: tolerance, clock: clock)
  }
}
