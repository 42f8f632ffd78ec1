import Glibc

/// A pthread mutex. RunLoopKit uses pthread mutexes rather than spin locks or futex-based
/// locks so ThreadSanitizer sees every happens-before edge between threads.
final class Lock: @unchecked Sendable {  // the mutex itself provides the synchronisation
  private let mutex: UnsafeMutablePointer<pthread_mutex_t>

  init() {
    mutex = .allocate(capacity: 1)
    mutex.initialize(to: pthread_mutex_t())
    let result = pthread_mutex_init(mutex, nil)
    precondition(result == 0, "pthread_mutex_init failed with \(result)")
  }

  deinit {
    pthread_mutex_destroy(mutex)
    mutex.deallocate()
  }

  func lock() {
    let result = pthread_mutex_lock(mutex)
    precondition(result == 0, "pthread_mutex_lock failed with \(result)")
  }

  func unlock() {
    let result = pthread_mutex_unlock(mutex)
    precondition(result == 0, "pthread_mutex_unlock failed with \(result)")
  }

  /// Atomically releases the mutex and sleeps on `condition`; the mutex is held on return.
  func wait(on condition: UnsafeMutablePointer<pthread_cond_t>) {
    let result = pthread_cond_wait(condition, mutex)
    precondition(result == 0, "pthread_cond_wait failed with \(result)")
  }

  @inline(__always)
  func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
    lock()
    defer { unlock() }
    return try body()
  }
}
