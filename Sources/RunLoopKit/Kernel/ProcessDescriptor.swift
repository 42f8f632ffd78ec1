import CRunLoopShims
import Glibc

/// A pidfd of a child process (`pidfd_open(2)`), closed once: what `ChildProcessSource`
/// watches, and the `waitid(P_PIDFD)` that reaps the child through it.
final class ProcessDescriptor: @unchecked Sendable {  // `closed` is guarded by `lock`
  let fd: Int32
  private let lock = Lock.make()
  private var closed = false

  /// Opens a pidfd of `processID`, which must be a child of this process.
  init(processID: pid_t) throws(LoopError) {
    guard processID > 0 else {
      throw .invalidArgument(
        name: "process ID", value: "\(processID)", reason: "a child's process ID is positive")
    }
    do throws(LoopError) {
      fd = try Syscall.retryingEINTR("pidfd_open", on: "process \(processID)") {
        crl_pidfd_open(processID)
      }
    } catch .system(let error) where error.errno == ESRCH {
      throw .invalidArgument(
        name: "process ID", value: "\(processID)",
        reason: "no process has this ID (pidfd_open: ESRCH); was it reaped already?")
    }
    // Asks, without reaping, whether it is our child: only a child's status can be read.
    do throws(LoopError) {
      _ = try wait(options: CRL_WNOWAIT)
    } catch .system(let error) where error.errno == ECHILD {
      close()  // once: deinit runs too, and must not close the number again
      throw .invalidArgument(
        name: "process ID", value: "\(processID)",
        reason: "it is not a child of this process (waitid: ECHILD); only a parent can "
          + "read a process's exit status")
    }
  }

  /// Reaps the child: its termination, `.reapedElsewhere` if someone else did, or nil if it
  /// has not ended yet.
  func reap() -> ChildProcessSource.Termination? {
    lock.withLock { () -> ChildProcessSource.Termination? in
      // Closed by an invalidation on another thread: the number may be another pidfd now.
      guard !closed else { return nil }
      do throws(LoopError) {
        return try wait(options: 0)
      } catch {
        // With our own open pidfd of our own child, ECHILD (someone else waited first) is
        // the only failure waitid has.
        return .reapedElsewhere
      }
    }
  }

  /// `waitid(P_PIDFD, fd, WEXITED | WNOHANG | options)`: how the child ended, or nil while it
  /// runs.
  private func wait(options: Int32) throws(LoopError) -> ChildProcessSource.Termination? {
    var code: Int32 = 0
    var status: Int32 = 0
    let pid = try Syscall.retryingEINTR("waitid(P_PIDFD)", on: "pidfd \(fd)") {
      crl_pidfd_wait(fd, CRL_WEXITED | CRL_WNOHANG | options, &code, &status)
    }
    guard pid > 0 else { return nil }
    switch code {
    case CRL_CLD_EXITED: return .exited(status)
    case CRL_CLD_DUMPED: return .signalled(status, coreDumped: true)
    default: return .signalled(status, coreDumped: false)
    }
  }

  func close() {
    lock.withLock {
      guard !closed else { return }
      closed = true
      Glibc.close(fd)
    }
  }

  deinit { close() }
}
