extension Loop {
  /// Counters a loop keeps about itself, readable from any thread. CFRunLoop keeps no such
  /// counters (its activity is visible only through observers and kdebug tracing).
  public struct Metrics: Sendable, Equatable {
    /// Passes through the loop (CF's iterations of `__CFRunLoopRun`).
    public var passes: UInt64 = 0
    /// Returns from `epoll_wait` (including polls and returns after spinning).
    public var waits: UInt64 = 0
    /// Waits that actually blocked in the kernel, and what ended them. One wake can have
    /// several causes (a timer and a descriptor ready together); each is counted.
    public var wakes = WakeCauses()
    /// Time spent blocked in the kernel, and time inside outermost `run` calls in all.
    public var timeAsleep: Duration = .zero
    public var timeRunning: Duration = .zero
    /// Work done: blocks run, sources handled (manual, descriptor and port), timers fired.
    public var blocksRun: UInt64 = 0
    public var sourcesHandled: UInt64 = 0
    public var timersFired: UInt64 = 0
    /// Times a poster wrote the wake-up eventfd. Posts to a busy or spinning loop cost none.
    public var wakeUpWrites: UInt64 = 0
    /// Times a mode's epoll set was rebuilt to shed a registration it could no longer remove.
    public var epollRebuilds = 0
    /// Descriptor sources found watching a file their fd no longer names (closed behind the
    /// loop's back, or closed and reused), each reported once as `invalidDescriptor`.
    public var staleDescriptors: UInt64 = 0

    /// Time inside `run` not spent asleep.
    public var timeBusy: Duration { timeRunning - timeAsleep }
  }

  /// What ended a blocking wait.
  public struct WakeCauses: Sendable, Equatable {
    /// A `LoopPort` received a message.
    public var port: UInt64 = 0
    /// The main dispatch queue got work (`Loop.main` only).
    public var mainQueue: UInt64 = 0
    /// Another descriptor source became ready.
    public var descriptor: UInt64 = 0
    /// The mode's timer went off.
    public var timer: UInt64 = 0
    /// `wakeUp()`, `perform`, `stop()` or a signalled source's wake-up.
    public var wakeUp: UInt64 = 0
    /// Nothing: the run's deadline passed.
    public var timeout: UInt64 = 0
  }

  /// A snapshot of the counters. Safe from any thread; they only grow.
  public var metrics: Metrics {
    lock.withLock {
      var snapshot = counters
      snapshot.waits = waitGeneration
      snapshot.wakeUpWrites = wakeWrites
      snapshot.epollRebuilds = epollRebuilds
      return snapshot
    }
  }
}
