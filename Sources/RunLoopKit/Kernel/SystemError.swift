import CRunLoopShims
import Glibc

/// A system call that failed: which call, on what, and the errno it returned.
///
/// CFRunLoop reports kernel failures by crashing or by returning `NULL`; RunLoopKit throws this
/// instead so the caller learns exactly which call failed on which value.
public struct SystemError: Error, Equatable, Sendable, CustomStringConvertible {
  /// The call that failed, for example `"epoll_ctl(ADD)"`.
  public let operation: String
  /// What it was applied to, for example `"fd 7"`.
  public let subject: String
  /// The errno the call left behind.
  public let errno: Int32

  public init(operation: String, subject: String, errno: Int32) {
    self.operation = operation
    self.subject = subject
    self.errno = errno
  }

  /// The symbolic errno name, such as `EBADF`, when it is one RunLoopKit meets often.
  public var errnoName: String {
    switch errno {
    case EBADF: "EBADF"
    case EPERM: "EPERM"
    case EEXIST: "EEXIST"
    case ENOENT: "ENOENT"
    case EINVAL: "EINVAL"
    case EMFILE: "EMFILE"
    case ENFILE: "ENFILE"
    case ENOMEM: "ENOMEM"
    case EAGAIN: "EAGAIN"
    case ENOSPC: "ENOSPC"
    case ELOOP: "ELOOP"
    default: "errno \(errno)"
    }
  }

  public var description: String {
    let reason = String(cString: strerror(errno))
    return "\(operation) on \(subject) failed: \(reason) (\(errnoName), errno \(errno))"
  }
}
