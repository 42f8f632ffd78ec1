import CRunLoopShims
import Dispatch
import Glibc
import XCTest

@testable import RunLoopDemos
@testable import RunLoopKit

/// The `signals` demo and the README's daemon snippet run `Loop.main`, so they are checked
/// here, on the main thread XCTest gives.
final class SignalsDemoTests: XCTestCase {
  func testSignalsScenarioCountsReloadsReapsTheChildAndStopsGracefully() throws {
    XCTAssertNotEqual(crl_is_main_thread(), 0, "XCTest should run this on the main thread")
    let report = try SignalsDemo.run()
    XCTAssertEqual(report.steps.count, 3)
    guard report.steps.count == 3 else { return }
    let (reload, child, stop) = (report.steps[0], report.steps[1], report.steps[2])
    // 1: three SIGUSR1 wake-ups, each handled by the source.
    let bySignal = reload.events.sleepCauses.filter {
      if case .descriptor("SIGUSR1", _) = $0.first { return true }
      return false
    }
    XCTAssertEqual(bySignal.count, 3, "\(reload.events.sleepCauses)")
    XCTAssertTrue(reload.notes.contains("reloads counted: 3"), "\(reload.notes)")
    XCTAssertTrue(reload.notes[2].contains("rlk-signals"), "\(reload.notes)")
    // 2: the child's pidfd woke the loop; status 7; reaped.
    XCTAssertTrue(child.notes[0].contains("exited with status 7"), "\(child.notes)")
    XCTAssertTrue(child.notes[0].contains("ECHILD: true"), "\(child.notes)")
    // 3: every queued job ran before the loop stopped, and a later post was refused.
    XCTAssertTrue(stop.notes[0].contains("(8 of 8)"), "\(stop.notes)")
    XCTAssertTrue(stop.notes[1].hasSuffix("true."), "\(stop.notes)")
    XCTAssertEqual(stop.events.last?.kind, .returned(.stopped))
    // The demo put every disposition back.
    XCTAssertEqual(crl_signal_disposition(SIGUSR1), 0)
    XCTAssertEqual(crl_signal_disposition(SIGTERM), 0)
    XCTAssertTrue(report.text().hasPrefix("== signals: "))
  }

  func testReadmeDaemonStopsOnSIGTERMAfterItsWorkersFinish() throws {
    let finished = Counter()
    // --- README and ProgramsOnLoops.md: signals as a source ---
    let workers = try ResidentThreadGroup(count: 4, name: "worker")
    let terminate = try SignalSource(signal: SIGTERM) { _ in
      workers.stop()  // every thread finishes what was posted to it before this
      try? workers.join()
      Loop.main.stop()
    }
    try Loop.main.add(terminate, to: .default)
    // --- end ---
    // Once Loop.main sleeps, slow work is posted to the group, then SIGTERM is sent.
    DispatchQueue.global().async {
      while !Loop.main.isWaiting { usleep(100) }
      for _ in 0..<40 {
        try? workers.next().perform {
          usleep(1_000)
          finished.increment()
        }
      }
      kill(getpid(), SIGTERM)
    }
    // --- README and ProgramsOnLoops.md: signals as a source (continued) ---
    Loop.main.run()  // returns once SIGTERM has been handled
    // --- end ---
    terminate.invalidate()
    XCTAssertEqual(finished.value, 40)
    XCTAssertThrowsError(try workers.next().perform {})
    XCTAssertEqual(crl_signal_disposition(SIGTERM), 0)
  }
}
