extension Loop {
  /// Counters a loop keeps about itself, readable from any thread. CFRunLoop keeps no such
  /// counters (its activity is visible only through observers and kdebug tracing).
  public struct Metrics: Sendable, Equatable {
    /// Times a poster wrote the wake-up eventfd. Posts to a busy or spinning loop cost none.
    public var wakeUpWrites: UInt64
    /// Returns from `epoll_wait` (including polls and returns after spinning).
    public var waits: UInt64
    /// Times a mode's epoll set was rebuilt to shed a registration it could no longer remove.
    public var epollRebuilds: Int
  }

  public var metrics: Metrics {
    lock.withLock {
      Metrics(wakeUpWrites: wakeWrites, waits: waitGeneration, epollRebuilds: epollRebuilds)
    }
  }
}
