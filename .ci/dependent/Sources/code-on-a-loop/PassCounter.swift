import RunLoopKit

/// Counts the passes of the loop it is made on: an observer whose handler updates self.
final class PassCounter {
  private(set) var passes = 0
  private var observer: LoopObserver?

  func start() throws {
    observer = try Loop.current.assumeIsolated().addObserver(.beforeTimers) { _, _ in
      self.passes += 1
    }
  }

  func stop() { observer?.invalidate() }
}
