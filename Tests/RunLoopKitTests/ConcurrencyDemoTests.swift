import CRunLoopShims
import XCTest

@testable import RunLoopDemos
@testable import RunLoopKit

/// The `concurrency` demo runs `Loop.main`, so it is checked here, on the main thread XCTest
/// gives, rather than with the other scenarios in Swift Testing.
final class ConcurrencyDemoTests: XCTestCase {
  func testConcurrencyScenarioShowsEachWakeCause() throws {
    XCTAssertNotEqual(crl_is_main_thread(), 0, "XCTest should run this on the main thread")
    let report = try ConcurrencyDemo.run()
    XCTAssertEqual(report.steps.count, 5)
    guard report.steps.count == 5 else { return }
    let (hop, sleep, block, held, released) = (
      report.steps[0].events, report.steps[1].events, report.steps[2].events,
      report.steps[3].events, report.steps[4].events
    )
    // 1 and 3: the main queue woke Loop.main and was served.
    for events in [hop, block] {
      XCTAssertEqual(events.sleepCauses.first, [.mainQueue])
      XCTAssertGreaterThanOrEqual(events.filter { $0.kind == .mainQueue }.count, 1)
    }
    // 2: the sleep was a Loop.main timer, and a timer wake ended one of the sleeps.
    XCTAssertTrue(sleep.sleepCauses.contains([.timer]), "\(sleep.sleepCauses)")
    XCTAssertEqual(sleep.fires(of: "Task.sleep"), 1)
    // 4: in "tracking" the main queue is not watched: only "touch" wakes, nothing is served.
    XCTAssertFalse(held.contains { $0.kind == .mainQueue })
    // Every sleep was woken by "touch". The run's deadline lands on touch's fourth fire, so
    // when the run started a little after the timer was made (a loaded machine), one last
    // short sleep can end at the deadline instead: that one may say so, and nothing else.
    let heldSleeps = held.sleepCauses
    XCTAssertTrue(heldSleeps.dropLast().allSatisfy { $0 == [.timer] }, "\(heldSleeps)")
    XCTAssertTrue(heldSleeps.last == [.timer] || heldSleeps.last == [.deadline], "\(heldSleeps)")
    XCTAssertGreaterThanOrEqual(heldSleeps.filter { $0 == [.timer] }.count, 3, "\(heldSleeps)")
    XCTAssertEqual(held.last?.kind, .returned(.timedOut))
    // 5: back in default, the held block is served at once.
    XCTAssertEqual(released.filter { $0.kind == .mainQueue }.count, 1)
    XCTAssertEqual(released.last?.kind, .returned(.stopped))
    // Every piece of work reported running on the main thread.
    let text = report.text()
    XCTAssertEqual(text.components(separatedBy: "ran on the main thread: true").count - 1, 4)
    XCTAssertFalse(text.contains("ran on the main thread: false"))
    XCTAssertTrue(text.hasPrefix("== concurrency: ") && text.contains("Why:"))
    XCTAssertTrue(report.svg().contains("runloop-demo concurrency"))
  }
}
