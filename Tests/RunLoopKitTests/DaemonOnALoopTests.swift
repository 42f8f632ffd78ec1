import CRunLoopShims
import Glibc
import Testing

@testable import RunLoopKit

// --- README and ProgramsOnLoops.md: a daemon's signals and child, as code on a loop ---
/// A plain class (not Sendable, no lock): its sources capture `self` and run on its thread.
final class Daemon {
  var reloads = 0
  var childStatus: ChildProcessSource.Termination?
  private var sources: [SignalSource] = []

  func start() throws {
    let loop = Loop.current.assumeIsolated()
    sources.append(try loop.addSignalSource(signal: SIGHUP) { count in self.reloads += count })
    sources.append(
      try loop.addSignalSource(signal: SIGTERM) { _ in
        self.stop()
        Loop.current.stop()
      })
  }

  func watch(child: pid_t) throws {
    try Loop.current.assumeIsolated().addChildProcessSource(processID: child) { ended in
      self.childStatus = ended
    }
  }

  func stop() {
    for source in sources { source.invalidate() }  // SIGHUP and SIGTERM act as before again
    sources = []
  }
}
// --- end ---

extension RunLoopKitTests {
  @Suite("A daemon on a loop") struct DaemonOnALoop {
    @Test(
      "82. An object on its loop's thread watches signals and a child with closures that capture self"
    )
    func test_82_daemonCapturesSelf() async {
      // In a child: it sends SIGTERM to its own process.
      await #expect(processExitsWith: .success) {
        let child = try spawnShell("exit 4")
        // What the runner had (SIGHUP is ignored under nohup): what the daemon must put back.
        let hangUp = crl_signal_disposition(SIGHUP)
        let terminate = crl_signal_disposition(SIGTERM)
        let outcome = try onLoopThread { loop -> String in
          let daemon = Daemon()
          try daemon.start()
          try daemon.watch(child: child)
          // Sent from this thread, before the loop runs: the deliveries wait in the counts.
          kill(getpid(), SIGHUP)
          let deadline = LoopClock.Instant.now.advanced(by: .seconds(10))
          while daemon.reloads == 0 || daemon.childStatus == nil, LoopClock.Instant.now < deadline {
            loop.run(until: deadline, returnAfterSourceHandled: true)
          }
          kill(getpid(), SIGTERM)
          let result = loop.run(for: .seconds(10))
          let status = daemon.childStatus.map(String.init(describing:)) ?? "-"
          return "\(daemon.reloads) \(status) \(result)"
        }
        precondition(outcome == "1 exited with status 4 stopped", outcome)
        precondition(crl_signal_disposition(SIGHUP) == hangUp)
        precondition(crl_signal_disposition(SIGTERM) == terminate)
      }
    }
  }
}
