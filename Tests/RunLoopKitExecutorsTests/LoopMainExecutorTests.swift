import RunLoopKit
import RunLoopKitExecutors
import Synchronization
import XCTest

/// An actor whose executor is the main executor the factory installs.
actor OnLoopMain {
  nonisolated var unownedExecutor: UnownedSerialExecutor {
    LoopMainExecutor.shared.asUnownedSerialExecutor()
  }
  var calls = 0
  func call() -> Bool {
    calls += 1
    return Loop.main.isCurrent && Loop.main.currentMode != nil
  }
}

final class Progress: Sendable {
  let offLoop = Atomic<Bool>(false)
}

/// `LoopMainExecutor` driven by hand on the real main thread (XCTest runs test methods there),
/// the way the runtime drives it when the factory is installed.
final class LoopMainExecutorTests: XCTestCase {
  /// What *Keeping a thread alive* says of the main thread: its default mode is never empty.
  func test_117_mainThreadsDefaultModeIsNeverEmpty() throws {
    let loop = Loop.main
    XCTAssertTrue(loop.isCurrent)
    let started = LoopClock.Instant.now
    XCTAssertEqual(loop.run(in: .default, for: .milliseconds(100)), .timedOut)
    XCTAssertGreaterThanOrEqual(started.duration(to: .now), .milliseconds(100))
  }

  func test_64_runUntilServesJobsUntilConditionHolds() throws {
    let actor = OnLoopMain()
    let progress = Progress()
    for _ in 0..<4 {
      Task.detached {
        for _ in 0..<250 {
          let onLoop = await actor.call()
          if !onLoop { progress.offLoop.store(true, ordering: .relaxed) }
        }
      }
    }
    // The condition reads the actor's state, changed only by jobs on this executor, so it is
    // checked after each of them; assumeIsolated holds on the main thread.
    try LoopMainExecutor.shared.runUntil { actor.assumeIsolated { $0.calls } == 1000 }
    XCTAssertFalse(progress.offLoop.load(ordering: .relaxed), "a job ran outside Loop.main")
  }

  func test_64_isolationHoldsOnMainThreadOnly() throws {
    XCTAssertEqual(LoopMainExecutor.shared.isIsolatingCurrentContext(), true)
    let elsewhere = try runUntilValue {
      await Task.detached { LoopMainExecutor.shared.isIsolatingCurrentContext() }.value
    }
    // nil, not false: the runtime then asks checkIsolated, whose trap names both threads.
    XCTAssertNil(elsewhere)
  }

  func test_64_stopEndsRun() throws {
    // A job that stops the executor: run() returns once it has run.
    let actor = OnLoopMain()
    Task.detached {
      _ = await actor.call()
      LoopMainExecutor.shared.stop()
    }
    try LoopMainExecutor.shared.run()
    let calls = try runUntilValue { await actor.calls }
    XCTAssertEqual(calls, 1)
  }

  /// Runs the main executor until `body`, run in a detached task, has produced its value.
  private func runUntilValue<T: Sendable>(_ body: @escaping @Sendable () async -> T) throws -> T {
    let result = Box<T>()
    let stopQueued = DispatchSemaphore(value: 0)
    Task.detached {
      let value = await body()
      result.value = value
      LoopMainExecutor.shared.stop()  // wakes the loop so runUntil looks again
      stopQueued.signal()
    }
    try LoopMainExecutor.shared.runUntil { result.value != nil }
    // runUntil may have seen the value before that stop ran: consume it here, or it would end
    // whichever Loop.main run comes next (another test's).
    XCTAssertEqual(stopQueued.wait(timeout: .now() + 10), .success, "the stop was never queued")
    drainMainLoop()
    return result.value!
  }
}

/// An NSLock (a pthread mutex ThreadSanitizer can see; Synchronization.Mutex's futex it cannot).
final class Box<T: Sendable>: @unchecked Sendable {  // `stored` is only touched under `lock`
  private let lock = NSLock()
  private var stored: T?
  var value: T? {
    get { lock.withLock { stored } }
    set { lock.withLock { stored = newValue } }
  }
}

/// Runs whatever is queued on `Loop.main` in one pass that never sleeps.
private func drainMainLoop() { Loop.main.run(in: .default, for: .zero) }
