import CRunLoopShims
import Dispatch
import Foundation
import XCTest

@testable import RunLoopKit

/// `Loop.main` serves `DispatchQueue.main` and the main actor (checklist lines 57 and 58). XCTest runs
/// these on the process's main thread, which Swift Testing does not.
final class MainQueueTests: XCTestCase {
  override func setUp() {
    XCTAssertNotEqual(crl_is_main_thread(), 0, "XCTest should run this on the main thread")
  }

  /// 57. While `Loop.main` runs in a common mode, main-queue blocks (posted before the run and
  /// from another thread during it) and `@MainActor` jobs run on the main thread, the blocks
  /// in FIFO order.
  func test_57_mainQueueAndMainActorRunWhileLoopMainRuns() throws {
    let recorder = Recorder()
    for index in 0..<5 {
      DispatchQueue.main.async { recorder.log("block \(index) \(onMainThread())") }
    }
    Task { @MainActor in recorder.log("actor \(onMainThread())") }
    let poster = TestThread {
      // During the run: once the main loop sleeps (every earlier block and job has run).
      waitUntil(seconds: 10) { Loop.main.isWaiting }
      DispatchQueue.main.async { recorder.log("late block \(onMainThread())") }
      Task {
        await MainActor.run { recorder.log("hop \(onMainThread())") }
        DispatchQueue.main.async { Loop.main.stop() }
      }
    }
    let result = Loop.main.run(for: .seconds(10))
    poster.join()
    XCTAssertEqual(result, .stopped)
    XCTAssertEqual(
      recorder.all,
      (0..<5).map { "block \($0) true" } + ["actor true", "late block true", "hop true"])
    XCTAssertGreaterThan(Loop.main.metrics.wakes.mainQueue, 0)
  }

  /// 57. Any common mode, not only the default one: a mode added to the common set serves
  /// main-queue blocks and main-actor jobs too.
  func test_57_anyCommonModeServesTheMainQueue() throws {
    try Loop.main.addCommonMode("modal sheet")
    let recorder = Recorder()
    DispatchQueue.main.async { recorder.log("block in \(mainLoopMode()) \(onMainThread())") }
    Task { @MainActor in
      recorder.log("actor in \(mainLoopMode()) \(onMainThread())")
      DispatchQueue.main.async { Loop.main.stop() }
    }
    XCTAssertEqual(Loop.main.run(in: "modal sheet", for: .seconds(10)), .stopped)
    XCTAssertEqual(recorder.all, ["block in modal sheet true", "actor in modal sheet true"])
  }

  /// 57. 10 000 main-actor hops from 4 threads each run exactly once, on the main thread.
  func test_57_tenThousandMainActorHops() throws {
    let counter = MainCounter()
    let posters = (0..<4).map { _ in
      TestThread {
        for _ in 0..<2_500 {
          Task { @MainActor in counter.hop() }
        }
      }
    }
    let result = Loop.main.run(for: .seconds(60))
    for poster in posters { poster.join() }
    XCTAssertEqual(result, .stopped, "only \(MainActor.assumeIsolated { counter.count }) hops ran")
    MainActor.assumeIsolated {
      XCTAssertEqual(counter.count, 10_000)
      XCTAssertEqual(counter.offMain, 0)
    }
  }

  /// 58. A nested run in a mode outside the common set runs no main-queue block and no
  /// main-actor job; they run once a common mode runs again.
  func test_58_nestedNonCommonRunHoldsTheMainQueueBack() throws {
    let recorder = Recorder()
    try Loop.main.add(ManualSource {}, to: "tracking")
    try Loop.main.perform(in: .default) {
      DispatchQueue.main.async { recorder.log("block") }
      Task { @MainActor in recorder.log("actor") }
      let nested = Loop.main.run(in: "tracking", for: .milliseconds(300))
      recorder.log("nested run returned \(nested)")
      DispatchQueue.main.async { Loop.main.stop() }
    }
    XCTAssertEqual(Loop.main.run(for: .seconds(10)), .stopped)
    XCTAssertEqual(recorder.all, ["nested run returned timedOut", "block", "actor"])
  }

  /// SwiftConcurrency.md's main-thread program snippet (bounded by a deadline here).
  func test_readmeMainThreadProgram() throws {
    let loop = Loop.main
    let tick = try LoopTimer(after: .milliseconds(100), repeating: .milliseconds(100)) { _ in
      MainActor.assumeIsolated { readmeFrames += 1 }
    }
    try loop.add(tick, to: .common)
    Task.detached {
      let total = (1...1_000).reduce(0, +)
      await MainActor.run { readmeOutput = "total \(total)" }
      DispatchQueue.main.async { Loop.main.stop() }
    }
    XCTAssertEqual(loop.run(in: .default, for: .seconds(10)), .stopped)
    tick.invalidate()
    MainActor.assumeIsolated { XCTAssertEqual(readmeOutput, "total 500500") }
  }

  /// The tracer and the metrics name the main queue as what woke `Loop.main`.
  func test_57_tracerNamesTheMainQueue() throws {
    let tracer = LoopTracer()
    try tracer.attach(to: Loop.main)
    defer { tracer.detach() }
    let poster = TestThread {
      waitUntil { Loop.main.isWaiting }
      DispatchQueue.main.async { Loop.main.stop() }
    }
    XCTAssertEqual(Loop.main.run(for: .seconds(10)), .stopped)
    poster.join()
    XCTAssertTrue(tracer.events.sleepCauses.contains([.mainQueue]))
    XCTAssertEqual(tracer.events.filter { $0.kind == .mainQueue }.count, 1)
    XCTAssertTrue(tracer.timeline().contains("served the main queue"))
  }

  /// `MainActor.assumeIsolated` holds inside a `Loop.main` timer callback: the main loop's
  /// callbacks run on the main actor's thread.
  func test_mainActorAssumeIsolatedInATimerCallback() throws {
    let recorder = Recorder()
    let timer = try LoopTimer(after: .milliseconds(10)) { _ in
      MainActor.assumeIsolated { recorder.log("isolated") }
      Loop.main.stop()
    }
    try Loop.main.add(timer, to: .default)
    XCTAssertEqual(Loop.main.run(for: .seconds(10)), .stopped)
    XCTAssertEqual(recorder.all, ["isolated"])
  }

  /// 57 side by side with Foundation: the same main-queue traffic gives the same order under
  /// `RunLoop.main.run(until:)` (CFRunLoop) and `Loop.main.run(for:)`.
  func test_57_matchesFoundationRunLoopMain() throws {
    func scenario(_ run: () -> Void) -> [String] {
      let recorder = Recorder()
      DispatchQueue.main.async {
        recorder.log("first")
        DispatchQueue.main.async { recorder.log("queued by first") }
      }
      Task { @MainActor in recorder.log("actor") }
      DispatchQueue.main.async { recorder.log("second") }
      let poster = TestThread { DispatchQueue.main.async { recorder.log("from a thread") } }
      poster.join()
      run()
      return recorder.all
    }
    let foundation = scenario { RunLoop.main.run(until: Date().addingTimeInterval(0.3)) }
    let ours = scenario { Loop.main.run(for: .milliseconds(300)) }
    XCTAssertEqual(ours, foundation)
    XCTAssertEqual(ours, ["first", "actor", "second", "from a thread", "queued by first"])
  }
}

/// Counts main-actor hops and stops `Loop.main` at the 10 000th.
@MainActor final class MainCounter: Sendable {
  var count = 0
  var offMain = 0

  nonisolated init() {}

  func hop() {
    count += 1
    if crl_is_main_thread() == 0 { offMain += 1 }
    if count == 10_000 { Loop.main.stop() }
  }
}

func onMainThread() -> Bool { crl_is_main_thread() != 0 }

func mainLoopMode() -> String { Loop.main.currentMode?.name ?? "no mode" }

@MainActor var readmeFrames = 0
@MainActor var readmeOutput = ""
