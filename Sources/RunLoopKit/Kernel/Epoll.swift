import CRunLoopShims
import Glibc

/// One epoll instance. Owns its descriptor and nothing else: what the registrations mean is
/// the loop's business, this type only speaks to the kernel.
///
/// Registrations carry a 64-bit token (never the raw fd) in `epoll_event.data`, so an event
/// can always be traced back to the registration that asked for it, even after the fd number
/// has been closed and handed out again.
final class Epoll: @unchecked Sendable {  // fd is immutable; isClosed under the loop lock
  struct Event {
    var token: UInt64
    var events: UInt32
  }

  let fd: Int32
  private(set) var isClosed = false
  private var buffer: UnsafeMutablePointer<epoll_event>
  private let capacity = 64

  init() throws(LoopError) {
    fd = try Syscall.retryingEINTR("epoll_create1(EPOLL_CLOEXEC)", on: "a new epoll instance") {
      crl_epoll_create()
    }
    buffer = .allocate(capacity: capacity)
  }

  deinit {
    close()
    buffer.deallocate()
  }

  func add(_ target: Int32, events: UInt32, token: UInt64) throws(LoopError) {
    try control(CRL_EPOLL_CTL_ADD, "epoll_ctl(ADD)", target, events, token)
  }

  func modify(_ target: Int32, events: UInt32, token: UInt64) throws(LoopError) {
    try control(CRL_EPOLL_CTL_MOD, "epoll_ctl(MOD)", target, events, token)
  }

  /// Removes the registration of the file `target` names now. Returns false when there was
  /// none to remove, which is never an error here: epoll_ctl(DEL) names a registration by fd
  /// number *and* file, so once the number was closed (EBADF) or handed to a file that was not
  /// added (ENOENT), to one that cannot be polled at all (EPERM: a regular file) or to this
  /// set itself (EINVAL), no call can reach the registration that was made. Every failure of
  /// DEL leaves the set as it was. The kernel dropped that registration if its file was
  /// closed everywhere; otherwise it lives on, and only a new set sheds it (the caller's
  /// business: see `ModeState.untrackedTokens`).
  @discardableResult
  func remove(_ target: Int32) -> Bool {
    crl_epoll_ctl(fd, CRL_EPOLL_CTL_DEL, target, 0, 0) == 0
  }

  /// What `probe(_:token:)` found on a number.
  enum Probe {
    /// The number still names the file registered under it.
    case holds
    /// It names no file, or another one.
    case other
    /// It names another file, and the registration the probe made for it could not be taken
    /// out again (the number was closed or reused meanwhile): one more that may linger.
    case otherLeftRegistered
  }

  /// Whether `target` still names the file registered under that number (with `token`).
  /// epoll keys a registration by file *and* fd number, so registering the number again fails
  /// with EEXIST exactly while it names that file: one `epoll_ctl(ADD)`, which fails before
  /// the kernel polls the file (an `epoll_ctl(MOD)`, which asks the same question, polls it:
  /// 281 ns against 206 ns here, for a pipe). Every other answer is a no: an add that
  /// succeeds registered some other file now on that number (taken out again at once); EBADF
  /// (closed), EPERM (a regular file) and EINVAL (this set itself) name no such file; and
  /// ENOMEM or ENOSPC come only after the kernel looked the pair up and found nothing. Only
  /// ELOOP comes before that look (a number naming an epoll set that nests too deep): then the
  /// `MOD` answers, as it did before.
  func probe(_ target: Int32, token: UInt64) -> Probe {
    while true {
      if crl_epoll_ctl(fd, CRL_EPOLL_CTL_ADD, target, 0, 0) == 0 {
        return remove(target) ? .other : .otherLeftRegistered
      }
      switch crl_errno() {
      case EINTR: continue
      case EEXIST: return .holds
      case ELOOP: return isRegistered(target, events: 0, token: token) ? .holds : .other
      default: return .other
      }
    }
  }

  /// Whether `target` still names the file that was registered with `token`, asked with
  /// `epoll_ctl(MOD)`: it succeeds only while the number refers to the file that was added;
  /// EBADF (closed), ENOENT (another file), EPERM (a regular file) or EINVAL (this set itself)
  /// mean it does not. Any other failure (out of kernel memory) says nothing about the file,
  /// and answers yes: a "no" parks a source for good. With an unchanged level-triggered mask
  /// the call changes nothing.
  func isRegistered(_ target: Int32, events: UInt32, token: UInt64) -> Bool {
    do throws(LoopError) {
      try modify(target, events: events, token: token)
      return true
    } catch .system(let failure) {
      return ![EBADF, ENOENT, EPERM, EINVAL].contains(failure.errno)
    } catch {
      return true
    }
  }

  private func control(
    _ op: Int32, _ name: String, _ target: Int32, _ events: UInt32, _ token: UInt64
  ) throws(LoopError) {
    do {
      try Syscall.retryingEINTR(name, on: "fd \(target)") {
        crl_epoll_ctl(fd, op, target, events, token)
      }
    } catch .system(let failure) where failure.errno == EPERM {
      // The file has no poll support; what it is decides the advice, so the error names it.
      throw .system(
        SystemError(
          operation: failure.operation, subject: failure.subject, errno: failure.errno,
          fileKind: FileKind.describe(target)))
    }
  }

  /// Blocks until at least one registration is ready or `timeoutNanoseconds` passes
  /// (negative waits forever). Returns nil when a signal interrupted the wait (EINTR), so
  /// the caller can retry with the time that is actually left. Only the owning loop's
  /// thread calls this.
  ///
  /// Returns how many events arrived; read them with `event(_:)` before the next wait. (No
  /// array is built: the path from a wake-up to the work it brings allocates nothing.)
  func wait(timeoutNanoseconds: Int64) throws(LoopError) -> Int? {
    let count = crl_epoll_wait(fd, buffer, Int32(capacity), timeoutNanoseconds)
    if count < 0 {
      let code = crl_errno()
      if code == EINTR { return nil }
      // A look (zero timeout) is a plain epoll_wait; a wait with a timeout, epoll_pwait2
      // where the kernel has it (see `crl_epoll_wait`).
      let call =
        timeoutNanoseconds == 0 || !Epoll.timeoutsArePrecise ? "epoll_wait" : "epoll_pwait2"
      throw .system(SystemError(operation: call, subject: "epoll fd \(fd)", errno: code))
    }
    return Int(count)
  }

  /// Whether a wait's timeout is kept to the nanosecond (`epoll_pwait2`): false on a kernel or
  /// seccomp filter that refuses that call, where waits fall back to `epoll_wait` and whole
  /// milliseconds. The kernel is asked once, by the first wait or by this property.
  static var timeoutsArePrecise: Bool { crl_epoll_timeouts_are_precise() != 0 }

  /// The `index`th event of the last wait.
  func event(_ index: Int) -> Event {
    Event(
      token: crl_epoll_event_data(buffer + index), events: crl_epoll_event_events(buffer + index))
  }

  func close() {
    guard !isClosed else { return }
    isClosed = true
    Glibc.close(fd)
  }
}
