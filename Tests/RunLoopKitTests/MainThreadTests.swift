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
