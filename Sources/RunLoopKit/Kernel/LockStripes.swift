/// A fixed set of mutexes shared by objects too numerous to own one each. A loop can hold a
/// million timers: a mutex of their own would be a million more allocations, and touching one
/// a cache miss on every add and cancel, where these few stay in cache.
///
/// An object keeps the stripe it was given for life. Stripes are leaf locks, as every item's
/// lock is: nothing is acquired while one is held, so two objects sharing a stripe can never
/// deadlock on it, only wait for each other briefly.
enum LockStripes {
  private static let locks = (0..<64).map { _ in Lock() }

  /// The stripe for the object numbered `number` (consecutive numbers get different stripes).
  static func lock(for number: UInt64) -> Lock {
    locks[Int(number % UInt64(locks.count))]
  }
}
