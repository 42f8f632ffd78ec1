import Glibc

/// A pthread mutex. RunLoopKit uses pthread mutexes rather than spin locks or futex-based
/// locks so ThreadSanitizer sees every happens-before edge between threads.
///
/// The mutex is glibc's adaptive kind: a thread that finds it taken spins a little before it
/// sleeps in the kernel. A loop's lock is held for a few dozen instructions at a time while a
/// poster and the loop's thread take it back to back, so the holder nearly always lets go
/// within the spin. Measured with one thread posting 10 M blocks to a busy loop: a plain
/// mutex made 0.8–4.7 M futex syscalls and halved the rate in some runs; this one made
/// 22–47 k.
///
/// The mutex lives in the lock object itself (tail-allocated, see `MutexBuffer`), not in a
/// block of its own: an item's lock is taken on every signal and delivery, and with a million
/// items each extra block is one more cache miss per event.
final class Lock: MutexBuffer<Void> {
  /// A new unlocked lock. (A `ManagedBuffer` is made by `create`, never by an initialiser.)
  static func make() -> Lock { unsafeDowncast(makeBuffer(header: ()), to: Lock.self) }
}
