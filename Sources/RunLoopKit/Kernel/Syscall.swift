import CRunLoopShims
import Glibc

/// The one place that turns the C convention (-1 and errno) into thrown `SystemError`s.
///
/// Every syscall RunLoopKit makes goes through `retryingEINTR`, so a signal arriving while a
/// thread is blocked in the kernel never surfaces as a spurious failure: EINTR only means
/// "ask again".
enum Syscall {
  @discardableResult
  static func retryingEINTR(
    _ operation: @autoclosure () -> String,
    on subject: @autoclosure () -> String,
    _ call: () -> Int32
  ) throws(LoopError) -> Int32 {
    while true {
      let result = call()
      if result >= 0 { return result }
      let code = crl_errno()
      if code == EINTR { continue }
      throw .system(SystemError(operation: operation(), subject: subject(), errno: code))
    }
  }

  /// Like `retryingEINTR`, but reports "would block" as `false` instead of an error: reads
  /// of non-blocking eventfds and timerfds use it to drain without caring whether they were set.
  static func readNonBlocking(
    _ operation: @autoclosure () -> String,
    on subject: @autoclosure () -> String,
    _ call: () -> Int32
  ) throws(LoopError) -> Bool {
    while true {
      if call() >= 0 { return true }
      let code = crl_errno()
      if code == EINTR { continue }
      if code == EAGAIN { return false }
      throw .system(SystemError(operation: operation(), subject: subject(), errno: code))
    }
  }

  /// Reads what a non-blocking descriptor has into `buffer`: the count (0 at the end), or nil
  /// when nothing is there now (EAGAIN). Retries EINTR; throws on any other error.
  static func readAvailable(
    _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer
  ) throws(LoopError) -> Int? {
    var count = 0
    // `read`'s count is an Int: kept aside, with only its sign handed to the retry loop.
    let read = try readNonBlocking("read", on: "fd \(fd)") {
      count = Glibc.read(fd, buffer.baseAddress, buffer.count)
      return count < 0 ? -1 : 0
    }
    return read ? count : nil
  }

  /// Writes `text` to standard error (fd 2) whole, for diagnostics; a failed write is
  /// dropped, as a diagnostic has nowhere else to go.
  static func writeToStandardError(_ text: String) {
    var bytes = Array(text.utf8)
    bytes.withUnsafeMutableBytes { buffer in
      var offset = 0
      while offset < buffer.count {
        let wrote = try? retryingEINTR("write", on: "standard error") {
          Int32(truncatingIfNeeded: write(2, buffer.baseAddress! + offset, buffer.count - offset))
        }
        guard let wrote, wrote > 0 else { return }
        offset += Int(wrote)
      }
    }
  }

  /// Sleeps the calling thread for `duration` (`nanosleep`); a signal makes it sleep again for
  /// what is left.
  static func sleep(for duration: Duration) throws(LoopError) {
    let nanoseconds = max(0, duration.saturatedNanoseconds)
    var request = timespec(
      tv_sec: Int(nanoseconds / 1_000_000_000), tv_nsec: Int(nanoseconds % 1_000_000_000))
    var left = timespec()
    while nanosleep(&request, &left) != 0 {
      let code = crl_errno()
      guard code == EINTR else {
        throw .system(SystemError(operation: "nanosleep", subject: "\(duration)", errno: code))
      }
      request = left
    }
  }
}
