import CRunLoopShims

/// The calling thread's timer slack: how late Linux may fire the hrtimer behind a timed sleep
/// (a futex wait, `epoll_pwait2`'s timeout) so that it can share a wake-up with other timers.
/// A thread starts with its creator's slack, 50 µs unless someone changed it. A timerfd
/// ignores slack; the sleeps a loop times itself do not.
enum TimerSlack {
  /// The least slack Linux accepts (0 would mean "back to the thread's default").
  static let least = 1

  /// Sets the calling thread's slack, in nanoseconds (at least 1).
  static func setCurrentThread(nanoseconds: Int) throws(LoopError) {
    try Syscall.retryingEINTR(
      "prctl(PR_SET_TIMERSLACK, \(nanoseconds))", on: "the calling thread"
    ) {
      crl_set_timer_slack(UInt(max(nanoseconds, least)))
    }
  }

  /// The calling thread's slack, in nanoseconds.
  static var currentThread: Int { crl_get_timer_slack() }
}
