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
    // Every worker is held in a block while 40 jobs queue up behind, then SIGTERM is sent.
    // The holds are let go only once the group refuses work, that is once the handler has
    // called stop(): the 40 jobs were all posted before the stop and still queued at it.
    let release = DispatchSemaphore(value: 0)
    DispatchQueue.global().async {
      for thread in workers.threads {
        try? thread.perform { _ = release.wait(timeout: .now() + 10) }
      }
      for _ in 0..<40 {
        try? workers.next().perform { finished.increment() }
      }
      kill(getpid(), SIGTERM)
      _ = waitUntil(seconds: 10) { (try? workers.threads[0].perform {}) == nil }
      for _ in workers.threads { release.signal() }
    }
    // --- README and ProgramsOnLoops.md: signals as a source (continued) ---
    Loop.main.run()  // returns once SIGTERM has been handled
    // --- end ---
    terminate.invalidate()
    XCTAssertEqual(finished.value, 40)
    XCTAssertTrue(workers.threads.allSatisfy { !$0.isRunning })
    XCTAssertThrowsError(try workers.next().perform {})
    XCTAssertEqual(crl_signal_disposition(SIGTERM), 0)
  }
}
