extension Loop {
  /// How a loop waits when a pass leaves it nothing to do: the trade between wake latency and
  /// CPU. CFRunLoop always sleeps; the spinning policies are RunLoopKit's addition, measured
  /// against pure busy-waiting by `runloop-bench`.
  public enum WaitPolicy: Sendable, Equatable, CustomStringConvertible {
    /// Block in the kernel at once (the default, and CF's behaviour): no CPU while idle.
    case sleep
    /// Poll without sleeping for up to the given window, then block. Work that arrives inside
    /// the window is picked up without a kernel wake-up, and its poster makes no syscall.
    case spinThenSleep(Duration)
    /// Never block: poll until there is work. Lowest latency, one full core while idle.
    case busyWait
    /// Spin only when work is likely to arrive soon: the loop learns the gaps between its
    /// waits and the work that ends them, and spins (for about twice the typical gap) only
    /// when recent gaps were short, backing off after spins that found nothing. Bursty
    /// traffic gets answers close to busy-waiting's; sparse traffic, or a poster on the
    /// loop's own CPU, gets `.sleep`'s behaviour. There is no window to tune.
    case adaptive

    /// A short form such as `sleep`, `spin 1 µs then sleep` or `busy-wait`.
    public var description: String {
      switch self {
      case .sleep: "sleep"
      case .spinThenSleep(let window): "spin \(Loop.WaitPolicy.format(window)) then sleep"
      case .busyWait: "busy-wait"
      case .adaptive: "adaptive"
      }
    }

    /// "1 µs", "250 ns", "2 ms": whole units, as a window is usually given.
    static func format(_ duration: Duration) -> String {
      let nanoseconds = duration.saturatedNanoseconds
      if nanoseconds % 1_000_000 == 0 && nanoseconds != 0 { return "\(nanoseconds / 1_000_000) ms" }
      if nanoseconds % 1_000 == 0 && nanoseconds != 0 { return "\(nanoseconds / 1_000) µs" }
      return "\(nanoseconds) ns"
    }
  }

  /// How this loop waits when idle. Safe to set from any thread; applies from the next wait.
  public var waitPolicy: WaitPolicy {
    get { lock.withLock { policy } }
    set { lock.withLock { policy = newValue } }
  }
}
