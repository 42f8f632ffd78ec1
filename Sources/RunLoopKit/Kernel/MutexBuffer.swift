import Glibc

/// An object that holds a pthread mutex (the adaptive kind, see `Lock`) after a header of
/// fields the mutex guards: the lock and what it guards in one allocation. Not `Sendable` (a
/// `ManagedBuffer` cannot be); the types that share one say why that is safe.
class MutexBuffer<Header>: ManagedBuffer<Header, pthread_mutex_t> {
  /// A new buffer of the calling subclass with `header`, its mutex initialised and unlocked.
  static func makeBuffer(header: Header) -> MutexBuffer<Header> {
    let buffer = create(minimumCapacity: 1) { _ in header }
    buffer.withUnsafeMutablePointerToElements { mutex in
      mutex.initialize(to: pthread_mutex_t())
      var attributes = pthread_mutexattr_t()
      pthread_mutexattr_init(&attributes)
      pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
      let result = pthread_mutex_init(mutex, &attributes)
      pthread_mutexattr_destroy(&attributes)
      precondition(result == 0, "pthread_mutex_init failed with \(result)")
    }
    return unsafeDowncast(buffer, to: MutexBuffer<Header>.self)
  }

  deinit {
    withUnsafeMutablePointerToElements { mutex in
      pthread_mutex_destroy(mutex)
      _ = mutex.deinitialize(count: 1)
    }
  }

  @inline(__always)
  final func lock() {
    let result = withUnsafeMutablePointerToElements { pthread_mutex_lock($0) }
    precondition(result == 0, "pthread_mutex_lock failed with \(result)")
  }

  @inline(__always)
  final func unlock() {
    let result = withUnsafeMutablePointerToElements { pthread_mutex_unlock($0) }
    precondition(result == 0, "pthread_mutex_unlock failed with \(result)")
  }

  /// Atomically releases the mutex and sleeps on `condition`; the mutex is held on return.
  final func wait(on condition: UnsafeMutablePointer<pthread_cond_t>) {
    let result = withUnsafeMutablePointerToElements { pthread_cond_wait(condition, $0) }
    precondition(result == 0, "pthread_cond_wait failed with \(result)")
  }

  @inline(__always)
  final func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
    lock()
    defer { unlock() }
    return try body()
  }
}
