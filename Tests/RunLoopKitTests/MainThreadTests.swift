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
