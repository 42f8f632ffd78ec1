import CRunLoopShims
import Glibc

/// Which loop belongs to which thread. Mirrors CF's `__CFRunLoops` dictionary plus its TSD
/// slot: a table keyed by pthread for `Loop.main` (which another thread may ask for first),
/// and a pthread key whose destructor tears a loop down when its thread exits.
final class LoopRegistry: @unchecked Sendable {  // `loops` is guarded by `lock`
  static let shared = LoopRegistry()

  private let lock = Lock.make()
  private var loops: [pthread_t: Loop] = [:]
  private let key: pthread_key_t
  /// The `VirtualLoop` the thread drives now, if any: `Loop.current` answers it before the
  /// thread's own loop. A slot of its own, so `Loop.main`, `isCurrent` and the exit teardown
  /// still see the thread's real loop. Unretained: the drive keeps the loop alive.
  private let shadowKey: pthread_key_t

  private init() {
    var key = pthread_key_t()
    let result = pthread_key_create(&key) { value in
      // Runs on the exiting thread: the value is the retained loop stored by `current()`.
      guard let value else { return }
      let loop = Unmanaged<Loop>.fromOpaque(value).takeRetainedValue()
      // Work the loop accepted runs first, with the loop still the thread's current one (the
      // key's value is cleared before a destructor runs; `Loop.current` in that work would
      // otherwise make a second loop). Cleared again after, so the destructor is not re-run.
      let key = LoopRegistry.shared.key
      pthread_setspecific(key, value)
      loop.runAcceptedWorkBeforeExit()
      pthread_setspecific(key, nil)
      LoopRegistry.shared.forget(loop)
      loop.tearDown()
    }
    precondition(result == 0, "pthread_key_create failed with \(result)")
    self.key = key
    var shadowKey = pthread_key_t()
    let shadowResult = pthread_key_create(&shadowKey, nil)
    precondition(shadowResult == 0, "pthread_key_create failed with \(shadowResult)")
    self.shadowKey = shadowKey
  }

  func current() -> Loop {
    if let shadow = pthread_getspecific(shadowKey) {
      return Unmanaged<Loop>.fromOpaque(shadow).takeUnretainedValue()
    }
    return threadsOwnLoop()
  }

  /// The calling thread's own loop, made on first use; a virtual loop it drives aside.
  private func threadsOwnLoop() -> Loop {
    if let stored = pthread_getspecific(key) {
      return Unmanaged<Loop>.fromOpaque(stored).takeUnretainedValue()
    }
    let me = pthread_self()
    let loop = lock.withLock { () -> Loop in
      if let existing = loops[me] { return existing }
      let created = Loop(thread: me, threadID: crl_gettid())
      loops[me] = created
      return created
    }
    pthread_setspecific(key, Unmanaged.passRetained(loop).toOpaque())
    return loop
  }

  /// Makes `loop` what `Loop.current` answers on the calling thread until `restoreCurrent` (a
  /// `VirtualLoop`'s, while the thread drives it); returns what it replaced, for nested
  /// drives of different virtual loops. The thread's own loop is untouched.
  func shadowCurrent(with loop: Loop) -> UnsafeMutableRawPointer? {
    let previous = pthread_getspecific(shadowKey)
    pthread_setspecific(shadowKey, Unmanaged.passUnretained(loop).toOpaque())
    return previous
  }

  /// Undoes `shadowCurrent`.
  func restoreCurrent(_ previous: UnsafeMutableRawPointer?) {
    pthread_setspecific(shadowKey, previous)
  }

  /// The calling thread's loop if it has one already (none is created).
  func existingLoop() -> Loop? {
    pthread_getspecific(key).map { Unmanaged<Loop>.fromOpaque($0).takeUnretainedValue() }
  }

  /// The loop registered for `thread`, if any, without creating one.
  func registeredLoop(for thread: pthread_t) -> Loop? {
    lock.withLock { loops[thread] }
  }

  func main() -> Loop {
    if crl_is_main_thread() != 0 { return threadsOwnLoop() }
    let mainThread = crl_main_thread()
    return lock.withLock {
      if let existing = loops[mainThread] { return existing }
      let created = Loop(thread: mainThread, threadID: getpid())
      loops[mainThread] = created
      return created
    }
  }

  private func forget(_ loop: Loop) {
    lock.withLock {
      if loops[loop.thread] === loop { loops[loop.thread] = nil }
    }
  }
}
