import RunLoopKit

/// A connection that lives on its loop's thread and arms its own idle timer: the example that
/// did not compile before `assumeIsolated()` (the timer's handler captures and mutates self).
final class Connection {
  var ticks = 0

  func start() throws {
    try Loop.current.assumeIsolated().addTimer(
      after: .milliseconds(10), repeating: .milliseconds(10)
    ) { timer in
      self.ticks += 1
      if self.ticks == 3 { timer.invalidate() }
    }
  }
}
