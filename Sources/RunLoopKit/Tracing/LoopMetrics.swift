extension Loop {
  /// Counters a loop keeps about itself, readable from any thread. CFRunLoop keeps no such
  /// counters (its activity is visible only through observers and kdebug tracing).
  public struct Metrics: Sendable, Equatable {
    /// Passes through the loop (CF's iterations of `__CFRunLoopRun`).
    public var passes: UInt64 = 0
    /// Returns from the kernel wait, `epoll_wait` or the futex (including polls and returns
    /// after spinning).
    public var waits: UInt64 = 0
    /// Of the `waits`, the looks without sleeping that asked the kernel nothing: in a mode
    /// with no descriptor to watch, the loop knows without `epoll_wait` all that it would say
    /// (see *Anatomy of an iteration*), so such a pass makes no syscall.
    public var looksWithoutKernel: UInt64 = 0
    /// Waits that actually blocked in the kernel, and what ended them. One wake can have
    /// several causes (a timer and a descriptor ready together); each is counted.
    public var wakes = WakeCauses()
    /// Time spent blocked in the kernel.
    public var timeAsleep: Duration = .zero
    /// Time spent inside outermost `run` calls in all, asleep or not.
    public var timeRunning: Duration = .zero
    /// Blocks run from the loop's queue (`perform` blocks and executor jobs).
    public var blocksRun: UInt64 = 0
    /// Sources handled: manual sources performed, descriptor and port handlers called.
    public var sourcesHandled: UInt64 = 0
    /// Timer handlers called.
    public var timersFired: UInt64 = 0
    /// Wake-ups a poster sent to a sleeping loop: an eventfd write, or a futex wake when the
    /// mode watches no descriptor. Posts to a busy or spinning loop cost none.
    public var wakeUpWrites: UInt64 = 0
    /// Times a mode's epoll set was rebuilt to shed a registration it could no longer remove.
    public var epollRebuilds = 0
    /// Rebuilds that could not be made: the process was out of descriptors even for the
    /// loop's spare set. The mode then polls its old set between 10 ms sleeps (descriptor
    /// events wait up to that long) and tries again on each pass, instead of spinning.
    public var epollRebuildFailures = 0
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

  /// A snapshot of the counters. Safe from any thread; they only grow. Time running and
  /// time asleep include the run and the sleep in progress, up to the moment of the call.
  public var metrics: Metrics {
    lock.withLock {
      var snapshot = counters
      let now = self.now
      if let start = outermostRunStart { snapshot.timeRunning += start.duration(to: now) }
      if let start = sleepStart {
        snapshot.timeAsleep += start.duration(to: now)
        asleepReportedUntil = now
      }
      snapshot.waits = waitGeneration
      snapshot.wakeUpWrites = wakeWrites
      snapshot.epollRebuilds = epollRebuilds
      snapshot.epollRebuildFailures = epollRebuildFailures
      return snapshot
    }
  }
}

extension Loop.Metrics: CustomStringConvertible {
  /// Three lines a person can read: time, wakes, work. For example:
  /// ```
  /// running 2.004 s: asleep 1.998 s (99.7 %), busy 0.006 s; 412 passes, 410 waits (5 without the kernel)
  /// woken 405 times: 400 wake-ups, 5 timers, 0 descriptors, 0 ports, 0 main queue, 0 timeouts
  /// ran 400 blocks, 0 sources, 5 timers; 400 wake-ups sent, 0 epoll rebuilds, 0 stale fds
  /// ```
  public var description: String {
    let woken =
      wakes.wakeUp + wakes.timer + wakes.descriptor + wakes.port + wakes.mainQueue
      + wakes.timeout
    var share = ""
    if timeRunning > .zero {
      let asleep = Double(timeAsleep.saturatedNanoseconds)
      let permille = (1000 * asleep / Double(timeRunning.saturatedNanoseconds)).rounded()
      share = " (\(LoopTracer.fixed(Int64(permille), unit: 10, decimals: 1)) %)"
    }
    return """
      running \(Self.seconds(timeRunning)): asleep \(Self.seconds(timeAsleep))\(share), \
      busy \(Self.seconds(timeBusy)); \(passes) passes, \(waits) waits \
      (\(looksWithoutKernel) without the kernel)
      woken \(woken) times: \(wakes.wakeUp) wake-ups, \(wakes.timer) timers, \
      \(wakes.descriptor) descriptors, \(wakes.port) ports, \(wakes.mainQueue) main queue, \
      \(wakes.timeout) timeouts
      ran \(blocksRun) blocks, \(sourcesHandled) sources, \(timersFired) timers; \
      \(wakeUpWrites) wake-ups sent, \(epollRebuilds) epoll rebuilds\(failedRebuilds), \
      \(staleDescriptors) stale fds
      """
  }

  /// " (2 failed)" after the rebuilds, when some could not be made; nothing otherwise.
  private var failedRebuilds: String {
    epollRebuildFailures == 0 ? "" : " (\(epollRebuildFailures) failed)"
  }

  /// "1.234 s", with the tracer's fixed-point formatting.
  private static func seconds(_ duration: Duration) -> String {
    LoopTracer.fixed(duration.saturatedNanoseconds, unit: 1_000_000_000, decimals: 3) + " s"
  }
}
