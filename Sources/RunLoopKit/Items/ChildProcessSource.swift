import Glibc

/// Calls its handler once, on its loop's thread, when a child process ends, with how it
/// ended; the child is reaped (no zombie is left).
///
/// CFRunLoop has no such source (Darwin programs use Dispatch's `DISPATCH_SOURCE_TYPE_PROC`
/// or kqueue's `EVFILT_PROC`); this is GLib's `g_child_watch_add` and libuv's `uv_spawn` exit
/// callback. It watches a pidfd (`pidfd_open(2)`, Linux 5.3+), which becomes readable when
/// the process ends: no `SIGCHLD` handler is involved, so it works whatever else in the
/// process handles `SIGCHLD`, on any loop and any number of loops.
///
/// After the handler has run the source is invalid and its pidfd closed. Invalidating it
/// earlier closes the pidfd and leaves the child to you: it is not reaped.
///
/// Foundation's `Process` reaps the children it starts itself (from its own `SIGCHLD`
/// source): watch those with its `terminationHandler`, not with this source, or one of the
/// two finds the child already gone (this source then reports `.reapedElsewhere`). Children
/// started with `posix_spawn`, `fork`/`exec` or any library that leaves reaping to you are
/// what this source is for.
///
/// Differences from the other sources: it fires at most once and invalidates itself; it is
/// bound to the first loop it is added to.
public final class ChildProcessSource: Sendable {
  /// How a child process ended.
  public enum Termination: Sendable, Equatable, CustomStringConvertible {
    /// It called `exit` (or returned from `main`) with this status.
    case exited(Int32)
    /// A signal ended it (`coreDumped` when the kernel wrote a core file).
    case signalled(Int32, coreDumped: Bool)
    /// Something else in the process waited for it first (a `waitpid(-1, …)` loop, or
    /// Foundation's `Process` when it started the child), so its status was not available.
    case reapedElsewhere

    /// "exited with status 7", "killed by SIGTERM", "reaped elsewhere".
    public var description: String {
      switch self {
      case .exited(let status): "exited with status \(status)"
      case .signalled(let signal, let dumped):
        "killed by \(SignalSource.name(of: signal))\(dumped ? " (core dumped)" : "")"
      case .reapedElsewhere: "reaped elsewhere before its status could be read"
      }
    }
  }

  /// The child's process ID.
  public let processID: pid_t
  let pidfd: ProcessDescriptor
  let source: DescriptorSource

  /// - Parameters:
  ///   - processID: a child of this process that has not been waited for yet.
  ///   - label: a name for traces; defaults to `"child PID"`.
  ///   - handler: called once, on the loop's thread, with how the child ended. A `sending`
  ///     closure: it may capture a non-Sendable value the caller hands over.
  /// - Throws: `LoopError.invalidArgument` when `processID` is not a child of this process
  ///   (errno ECHILD) or names no process (ESRCH), or `.system` when `pidfd_open` fails.
  public convenience init(
    processID: pid_t, label: String? = nil, handler: sending @escaping (Termination) -> Void
  ) throws(LoopError) {
    try self.init(
      processID: processID, label: label, isolatedHandler: handler, releasesOnLoopThread: false)
  }

  /// The public initialiser with a plain handler: that one has the `sending` proof,
  /// `IsolatedLoop.addChildProcessSource` the thread check.
  init(
    processID: pid_t, label: String?, isolatedHandler handler: @escaping (Termination) -> Void,
    releasesOnLoopThread: Bool
  ) throws(LoopError) {
    let pidfd = try ProcessDescriptor(processID: processID)
    self.processID = processID
    self.pidfd = pidfd
    self.source = DescriptorSource(
      fileDescriptor: pidfd.fd, label: label ?? "child \(processID)", interest: .readable,
      order: 0, onTeardown: nil, ownsDescriptor: true, releasesOnLoopThread: releasesOnLoopThread,
      handler: { source, _ in
        // Readable means the process has ended, so this does not block.
        guard let termination = pidfd.reap() else { return }
        TestPausePoint.reach(.childReaped, by: source)
        if source.invalidateFirst() { pidfd.close() }
        handler(termination)
      })
  }

  /// False once the handler has run, or the source was invalidated or its loop torn down.
  public var isValid: Bool { source.isValid }

  /// The name given at creation, or `"child PID"`.
  public var label: String? { source.label }

  /// Stops watching and closes the pidfd; the handler is never called and the child, if it
  /// is still running or not yet reaped, is left to you.
  public func invalidate() {
    // Closed only by the call that took the pidfd out of every epoll set; otherwise by the
    // handler's own invalidation, or when the last reference goes.
    if source.invalidateFirst() { pidfd.close() }
  }
}
