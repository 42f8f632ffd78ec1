import CRunLoopShims
import Glibc
import Synchronization

/// A non-blocking, close-on-exec eventfd: the Linux stand-in for a Mach port that carries
/// no payload. Writing makes it readable; reading resets it.
final class EventFD: @unchecked Sendable {  // fd is immutable; isClosed has one owner
  let fd: Int32
  private(set) var isClosed = false

  init() throws(LoopError) {
    fd = try Syscall.retryingEINTR("eventfd(EFD_NONBLOCK|EFD_CLOEXEC)", on: "a new eventfd") {
      crl_eventfd_create(0)
    }
  }

  deinit { close() }

  /// Signals reserved with `reserveSignal()` and not yet made; `close()` waits for them.
  private let signalsInFlight = Atomic<Int>(0)

  /// Adds one to the counter, which makes the descriptor readable.
  func signal() throws(LoopError) { try EventFD.signal(fd) }

  /// `signal()` on any eventfd, including one this process does not own (libdispatch's
  /// main-queue handle).
  static func signal(_ fd: Int32) throws(LoopError) {
    try Syscall.retryingEINTR("write(eventfd)", on: "fd \(fd)") { crl_eventfd_write(fd, 1) }
  }

  /// For owners that decide to signal while holding their lock but write only after releasing
  /// it (a woken reader takes that lock first thing and must not find it held). Call this
  /// under the lock that also guards the decision to close, then `completeSignal()` after
  /// releasing it; `close()` waits for reserved signals, so none lands on a descriptor number
  /// that was closed and handed out again.
  func reserveSignal() {
    signalsInFlight.add(1, ordering: .acquiring)
  }

  /// Whether a reserved signal has not been written yet.
  var hasSignalsInFlight: Bool { signalsInFlight.load(ordering: .acquiring) > 0 }

  /// The write reserved by `reserveSignal()`.
  func completeSignal() throws(LoopError) {
    defer { signalsInFlight.subtract(1, ordering: .releasing) }
    try signal()
  }

  /// Resets the counter; returns whether it was set.
  @discardableResult
  func drain() throws(LoopError) -> Bool { try EventFD.drain(fd) }

  /// `drain()` on any eventfd, including one this process does not own.
  @discardableResult
  static func drain(_ fd: Int32) throws(LoopError) -> Bool {
    var value: UInt64 = 0
    return try Syscall.readNonBlocking("read(eventfd)", on: "fd \(fd)") {
      crl_eventfd_read(fd, &value)
    }
  }

  /// Closes the descriptor once every reserved signal has been made. The owner must already
  /// refuse new reservations (it decides that under its lock), so the wait is short.
  func close() {
    while signalsInFlight.load(ordering: .acquiring) > 0 { sched_yield() }
    guard !isClosed else { return }
    isClosed = true
    Glibc.close(fd)
  }
}
