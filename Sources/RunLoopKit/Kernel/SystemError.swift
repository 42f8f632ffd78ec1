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
  /// What kind of file `subject` was when the call failed, such as `"a character device"`,
  /// where that decides what the errno means (epoll's EPERM); nil otherwise.
  public let fileKind: String?

  /// Records that `operation` failed on `subject` (a file of `fileKind`, when known) and left
  /// `errno` behind.
  public init(operation: String, subject: String, errno: Int32, fileKind: String? = nil) {
    self.operation = operation
    self.subject = subject
    self.errno = errno
    self.fileKind = fileKind
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

  /// "… failed: Operation not permitted (EPERM, errno 1)", plus what that errno means for
  /// this call where the kernel's wording would mislead.
  public var description: String {
    let reason = String(cString: strerror(errno))
    let text = "\(operation) on \(subject) failed: \(reason) (\(errnoName), errno \(errno))"
    return hint.map { "\(text): \($0)" } ?? text
  }

  /// epoll answers EPERM for a file whose driver has no poll support: regular files and
  /// directories (always "ready", so nothing to wait for) and some devices, `/dev/null` among
  /// them. Said plainly, since "Operation not permitted" suggests a permissions problem.
  private var hint: String? {
    guard operation.hasPrefix("epoll_ctl"), errno == EPERM else { return nil }
    let what = fileKind.map { "\(subject) is \($0), which" } ?? "this descriptor"
    let why =
      switch fileKind {
      case "a regular file", "a directory": " (such files are always ready: read them directly)"
      default: ""
      }
    return "\(what) does not support epoll\(why); "
      + "watch a pipe, socket, eventfd, timerfd or terminal instead"
  }
}
