import CRunLoopShims
import Synchronization

/// A fixed set of locks shared by objects too numerous to own one each. A loop can hold a
/// million timers: a mutex of their own would be a million more allocations, and touching one
/// a cache miss on every add and cancel, where these few stay in cache.
///
/// An object keeps the stripe it was given for life. Stripes are leaf locks, as every item's
/// lock is: nothing is acquired while one is held, so two objects sharing a stripe can never
/// deadlock on it, only wait for each other briefly.
enum LockStripes {
  private static let count = 64
  /// Words per stripe: one stripe per 64-byte line, so threads using two stripes do not
  /// share a line.
  private static let stride = 16
  private static let words = Words()

  /// The stripe for the object numbered `number` (consecutive numbers get different stripes).
  static func lock(for number: UInt64) -> StripeLock {
    StripeLock(word: words.base + Int(number % UInt64(count)) * stride)
  }

  /// The stripes' words, allocated once and never freed (stripes live as long as the process).
  private struct Words: @unchecked Sendable {  // only ever reached through atomic operations
    let base: UnsafeMutablePointer<Atomic<UInt32>>

    init() {
      let raw = UnsafeMutableRawPointer.allocate(
        byteCount: LockStripes.count * LockStripes.stride * MemoryLayout<UInt32>.stride,
        alignment: 64)
      base = raw.bindMemory(
        to: Atomic<UInt32>.self, capacity: LockStripes.count * LockStripes.stride)
      for index in 0..<LockStripes.count * LockStripes.stride {
        (base + index).initialize(to: Atomic(StripeLock.unlocked))
      }
    }
  }
}

/// One stripe: a futex lock (Drepper's "Futexes are tricky", mutex 3) on a word of
/// `LockStripes`. Uncontended, `lock()` is one compare-and-swap and `unlock()` one exchange,
/// inlined, where a pthread mutex costs two library calls of some thirty instructions each
/// (an add and a cancel each take a stripe once, measured with callgrind). No reference
/// counting either: a class reference, even `unowned(unsafe)`, is loaded as a strong one, and
/// every lock and unlock retained and released the shared `Lock` object.
struct StripeLock {
  // Computed, not stored: a stored static is a lazily made global, checked on each use.
  @inline(__always) static var unlocked: UInt32 { 0 }
  @inline(__always) static var locked: UInt32 { 1 }
  /// Locked, and a thread may be asleep on the word: `unlock()` must wake one.
  @inline(__always) static var contended: UInt32 { 2 }

  private let word: UnsafeMutablePointer<Atomic<UInt32>>

  init(word: UnsafeMutablePointer<Atomic<UInt32>>) { self.word = word }

  @inline(__always)
  func lock() {
    if word.pointee.compareExchange(
      expected: StripeLock.unlocked, desired: StripeLock.locked, ordering: .acquiring
    ).exchanged {
      return
    }
    lockContended()
  }

  @inline(__always)
  func unlock() {
    if word.pointee.exchange(StripeLock.unlocked, ordering: .releasing) == StripeLock.contended {
      _ = crl_futex_wake(address, 1)
    }
  }

  @inline(__always)
  func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
    lock()
    defer { unlock() }
    return try body()
  }

  /// A stripe is held for a few dozen instructions: spin briefly before sleeping. A thread
  /// that sleeps marks the word contended, so the holder's unlock wakes it; having marked it,
  /// it holds the lock as soon as its exchange finds the word unlocked.
  @inline(never)
  private func lockContended() {
    for _ in 0..<100 {
      if word.pointee.load(ordering: .relaxed) == StripeLock.unlocked,
        word.pointee.compareExchange(
          expected: StripeLock.unlocked, desired: StripeLock.locked, ordering: .acquiring
        ).exchanged
      {
        return
      }
    }
    while word.pointee.exchange(StripeLock.contended, ordering: .acquiring) != StripeLock.unlocked {
      // EAGAIN (the word changed), EINTR and spurious wakes all mean: try again.
      _ = crl_futex_wait(address, StripeLock.contended, -1)
    }
  }

  /// The word as the kernel sees it.
  private var address: UnsafeMutablePointer<UInt32> {
    UnsafeMutableRawPointer(word).assumingMemoryBound(to: UInt32.self)
  }
}
