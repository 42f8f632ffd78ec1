import Glibc

/// A pthread condition variable used with a `Lock`: the blocking hand-offs of the resident
/// thread (start-up, join, performAndWait) wait on one of these.
final class Condition: @unchecked Sendable {  // pthread_cond_t synchronises itself
  private let condition: UnsafeMutablePointer<pthread_cond_t>

  init() {
    condition = .allocate(capacity: 1)
    condition.initialize(to: pthread_cond_t())
    let result = pthread_cond_init(condition, nil)
    precondition(result == 0, "pthread_cond_init failed with \(result)")
  }

  deinit {
    pthread_cond_destroy(condition)
    condition.deallocate()
  }

  /// Waits until `predicate` holds; `lock` must be held, and is held again on return.
  func wait(on lock: Lock, until predicate: () -> Bool) {
    while !predicate() { lock.wait(on: condition) }
  }

  func broadcast() { pthread_cond_broadcast(condition) }
}
