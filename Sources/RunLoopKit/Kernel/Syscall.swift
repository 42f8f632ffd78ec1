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
