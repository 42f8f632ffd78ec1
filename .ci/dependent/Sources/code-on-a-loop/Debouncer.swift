import RunLoopKit

/// Runs its stored action once the input has been quiet for `delay`. The action is a plain
/// closure: neither `@Sendable` nor `sending`.
final class Debouncer {
  private let delay: Duration
  private let action: () -> Void
  private var pending: ScheduledBlock?

  init(delay: Duration, action: @escaping () -> Void) {
    self.delay = delay
    self.action = action
  }

  func input() throws {
    pending?.cancel()
    pending = try Loop.current.assumeIsolated().perform(after: delay) { self.action() }
  }
}
