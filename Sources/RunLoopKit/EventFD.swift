import CRunLoopShims
import Glibc

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

  /// Adds one to the counter, which makes the descriptor readable.
  func signal() throws(LoopError) {
    try Syscall.retryingEINTR("write(eventfd)", on: "fd \(fd)") { crl_eventfd_write(fd, 1) }
  }

  /// Resets the counter; returns whether it was set.
  @discardableResult
  func drain() throws(LoopError) -> Bool {
    var value: UInt64 = 0
    return try Syscall.readNonBlocking("read(eventfd)", on: "fd \(fd)") {
      crl_eventfd_read(fd, &value)
    }
  }

  func close() {
    guard !isClosed else { return }
    isClosed = true
    Glibc.close(fd)
  }
}
