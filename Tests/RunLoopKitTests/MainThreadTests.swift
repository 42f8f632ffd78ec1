import CRunLoopShims
import XCTest

@testable import RunLoopKit

/// XCTest runs its tests on the process's main thread (Swift Testing does not), so the one
/// checklist line that needs the real main thread lives here.
final class MainThreadTests: XCTestCase {
  /// 2. On the main thread `Loop.current === Loop.main`; from another thread `Loop.main` is
  /// still the main thread's loop.
  func test_02_currentIsMainOnMainThread() throws {
    XCTAssertNotEqual(crl_is_main_thread(), 0, "XCTest should run this on the main thread")
    let main = Loop.main
    XCTAssertTrue(Loop.current === main)
    let fromOther = try onLoopThread { _ in ObjectIdentifier(Loop.main) }
    XCTAssertEqual(fromOther, ObjectIdentifier(main))
    let otherCurrent = try onLoopThread { loop in ObjectIdentifier(loop) }
    XCTAssertNotEqual(otherCurrent, ObjectIdentifier(main))
  }
}

/// A `VirtualLoop` driven by the main thread is `Loop.current` there, but `Loop.main` stays the
/// main thread's own loop: main-queue work and `Loop.main.perform` never land on the virtual
/// loop, and neither loop serves the other's items.
final class VirtualLoopOnMainThreadTests: XCTestCase {
  func test_76_virtualLoopDrivenByMainThreadLeavesLoopMainAlone() throws {
    XCTAssertNotEqual(crl_is_main_thread(), 0, "XCTest should run this on the main thread")
    let main = Loop.main
    let virtual = VirtualLoop()
    let (current, mainThere, mainIsCurrent) = virtual.asCurrent {
      (Loop.current, Loop.main, Loop.main.isCurrent)
    }
    XCTAssertTrue(current === virtual.loop)
    XCTAssertTrue(mainThere === main, "Loop.main is the main thread's loop while it drives")
    XCTAssertTrue(mainIsCurrent, "the main thread is still Loop.main's thread")
    XCTAssertTrue(Loop.current === main, "and Loop.current answers it again after")
    // The virtual loop has not picked up the main queue's source (only Loop.main serves it).
    virtual.runUntilIdle()
    XCTAssertFalse(virtual.loop.debugDescription.contains("main queue"))
  }
}

/// State isolated to the main actor that arms `Loop.main`'s callbacks through the view: the
/// closures are main-actor isolated and run on the main thread, inside `Loop.main`.
@MainActor final class MainActorCounter {
  var hits = 0

  func arm() throws {
    let view = Loop.main.assumeIsolated()
    try view.perform { self.hits += 1 }
    try view.addTimer(after: .zero) { _ in self.hits += 1 }
  }
}

final class MainActorOnLoopTests: XCTestCase {
  /// 75. Code isolated to the main actor arms `Loop.main`'s callbacks through
  /// `Loop.main.assumeIsolated()`; they run on the main thread when `Loop.main` runs.
  func test_75_mainActorArmsMainLoop() throws {
    let hits = try MainActor.assumeIsolated { () throws -> Int in
      let counter = MainActorCounter()
      try counter.arm()
      for _ in 0..<100 where counter.hits < 2 {
        Loop.main.run(in: .default, for: .milliseconds(10))
      }
      return counter.hits
    }
    XCTAssertEqual(hits, 2)
  }
}
