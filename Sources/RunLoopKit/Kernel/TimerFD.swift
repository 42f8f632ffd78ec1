import CRunLoopShims
import Glibc

/// A non-blocking, close-on-exec timerfd on CLOCK_MONOTONIC (the clock behind `LoopClock`),
/// armed at absolute nanosecond deadlines. It becomes readable when the deadline passes, so a
/// mode's timers wake its epoll set exactly like any other descriptor.
final class TimerFD: @unchecked Sendable {  // mutable state under the loop lock
  let fd: Int32
  private(set) var isClosed = false
  /// The deadline the kernel currently holds, so re-arming at the same time costs no syscall.
  private(set) var armedDeadline: LoopClock.Instant?

  init() throws(LoopError) {
    fd = try Syscall.retryingEINTR("timerfd_create(CLOCK_MONOTONIC)", on: "a new timerfd") {
      crl_timerfd_create()
    }
  }

  deinit { close() }

  /// Arms at `deadline` (a deadline in the past fires at once); `nil` disarms. Does nothing
  /// once closed: the number may name someone else's descriptor by then.
  func arm(at deadline: LoopClock.Instant?) throws(LoopError) {
    guard deadline != armedDeadline, !isClosed else { return }
    // it_value == 0 would disarm, so the earliest representable deadline is 1 ns.
    let nanoseconds = deadline.map { max($0.nanoseconds, 1) } ?? 0
    try Syscall.retryingEINTR("timerfd_settime(TFD_TIMER_ABSTIME)", on: "fd \(fd)") {
      crl_timerfd_arm_absolute(fd, nanoseconds)
    }
    armedDeadline = deadline
  }

  /// Clears the readable state after an expiry; returns whether it had expired.
  @discardableResult
  func acknowledge() throws(LoopError) -> Bool {
    var expirations: UInt64 = 0
    let expired = try Syscall.readNonBlocking("read(timerfd)", on: "fd \(fd)") {
      crl_timerfd_read(fd, &expirations)
    }
    if expired { armedDeadline = nil }
    return expired
  }

  func close() {
    guard !isClosed else { return }
    isClosed = true
    Glibc.close(fd)
  }
}
