import CRunLoopShims
import Glibc

/// Calls its handler on its loop's thread when the process receives a Unix signal, with the
/// number of deliveries since the last call.
///
/// CFRunLoop has no signal source (on Darwin, Dispatch's `DISPATCH_SOURCE_TYPE_SIGNAL` and
/// kqueue's `EVFILT_SIGNAL` fill the gap); this is libuv's `uv_signal_t` and GLib's
/// `g_unix_signal_add` as a version-1 source. It works whatever threads exist and whatever
/// their signal masks, with no `sigprocmask` in your code:
/// - while at least one source of a signal is in a mode, a process-wide handler is installed
///   for it; on each delivery (on whichever thread the kernel picks) it counts the delivery
///   for every source of that signal and writes each one's eventfd, doing nothing that is
///   unsafe in a signal handler. The handler you give runs later, on the loop's thread, as a
///   source callout;
/// - several sources, on one loop or several, may watch the same signal: each sees every
///   delivery;
/// - when the last source of a signal leaves its last mode (removed, invalidated, or its
///   loop torn down), the disposition found before the first was added is put back: with
///   `SIG_DFL` there, the signal takes its default action again.
///
/// Deliveries coalesce twice: the kernel keeps one pending instance of a standard signal
/// (real-time signals, `SIGRTMIN...SIGRTMAX`, are queued one by one), and the source adds up
/// what arrives between two calls of its handler. Nothing counted is lost: a source taken out
/// of its modes keeps its count for when it is added again.
///
/// Other code that handles the same signal: a signal has one disposition per process, and
/// the last `sigaction` wins. A handler installed *before* the first source (your own, or a
/// library's) keeps being called after the source's count, so both see every delivery (it
/// runs with every asynchronous signal blocked, the mask this library's handler runs with).
/// One installed *after* replaces this one: the sources go quiet, and when the last of them
/// goes, the other handler is left in place. Dispatch's `DispatchSource.makeSignalSource`
/// also reads the signal from a signalfd of its own, which can take a pending delivery before
/// any handler runs: with both watching one signal, which sees a given delivery is a race, so
/// watch a signal with one of them. Threads that
/// block the signal (Dispatch's do, once one of its signal sources has fired on them) are
/// skipped by the kernel. A process-directed signal that every thread blocks still arrives:
/// while any signal has a source, the library keeps one thread of its own ("rlk-signals")
/// that leaves exactly the watched signals unblocked. A signal sent to one thread
/// (`pthread_kill`) that blocks it waits until that thread unblocks it.
///
/// While a source of `SIGCHLD` is in a mode, `SIG_IGN`'s automatic reaping of children is
/// off (a handler is installed); the `SA_NOCLDSTOP`/`SA_NOCLDWAIT` flags found are kept. A
/// child made by `fork()` without `exec` inherits the handler but not the loops: close or
/// reset what it needs before it relies on a signal's default action.
///
/// Refused with `LoopError.invalidArgument` naming the signal: `SIGKILL` and `SIGSTOP` (no
/// process can catch them), the synchronous faults `SIGSEGV`, `SIGBUS`, `SIGFPE` and `SIGILL`
/// (the faulting thread must handle them at once; returning re-runs the faulting instruction)
/// and the two real-time signals glibc keeps for itself.
///
/// Differences from the other sources: bound to the first loop it is added to, like every
/// item; its handler receives a count rather than the descriptor's events; a process can
/// have at most 256 signal sources in modes at once.
public final class SignalSource: Sendable {
  /// The signal number watched, such as `SIGTERM`.
  public let signal: Int32
  let watch: SignalWatch
  let source: DescriptorSource

  /// - Parameters:
  ///   - signal: the signal to watch (`SIGTERM`, `SIGINT`, `SIGHUP`, `SIGUSR1`, `SIGCHLD`,
  ///     `SIGRTMIN + n`, …).
  ///   - label: a name for traces; defaults to the signal's name.
  ///   - order: lower orders are handled first when several sources are ready at once.
  ///   - handler: called on the loop's thread with the deliveries since its last call (at
  ///     least 1). A `sending` closure: it may capture a non-Sendable value the caller hands
  ///     over.
  /// - Throws: `LoopError.invalidArgument` for a signal that cannot or must not be caught this
  ///   way, or `.system` if no eventfd could be made.
  public convenience init(
    signal: Int32, label: String? = nil, order: Int = 0,
    handler: sending @escaping (Int) -> Void
  ) throws(LoopError) {
    try self.init(
      signal: signal, label: label, order: order, isolatedHandler: handler,
      releasesOnLoopThread: false)
  }

  /// The public initialiser with a plain handler: that one has the `sending` proof.
  init(
    signal: Int32, label: String?, order: Int, isolatedHandler handler: @escaping (Int) -> Void,
    releasesOnLoopThread: Bool
  ) throws(LoopError) {
    try SignalSource.checkCatchable(signal)
    let watch = try SignalWatch(signal: signal)
    self.signal = signal
    self.watch = watch
    self.source = DescriptorSource(
      fileDescriptor: watch.eventFD.fd, label: label ?? SignalSource.name(of: signal),
      interest: .readable, order: order, onTeardown: nil, ownsDescriptor: true,
      membership: watch, releasesOnLoopThread: releasesOnLoopThread,
      handler: { source, _ in
        TestPausePoint.reach(.signalDeliveryStarting, by: source)
        let count = watch.takeDeliveries()
        if count > 0 { handler(count) }
      })
  }

  /// False once the source was invalidated or its loop torn down.
  public var isValid: Bool { source.isValid }

  /// The name given at creation, or the signal's name.
  public var label: String? { source.label }

  /// Removes the source from every mode (putting the signal's disposition back if it was the
  /// last source of it), closes its eventfd and releases the handler.
  public func invalidate() {
    source.invalidate()
    watch.close()
  }

  /// The conventional name of a signal number: `"SIGTERM"`, `"SIGRTMIN+3"`, or
  /// `"signal 99"` for a number that names none.
  public static func name(of signal: Int32) -> String {
    if let name = standardNames[signal] { return name }
    let first = crl_signal_min_realtime()
    let last = crl_signal_max_realtime()
    if signal == first { return "SIGRTMIN" }
    if signal > first && signal <= last { return "SIGRTMIN+\(signal - first)" }
    return "signal \(signal)"
  }

  private static let standardNames: [Int32: String] = [
    SIGHUP: "SIGHUP", SIGINT: "SIGINT", SIGQUIT: "SIGQUIT", SIGILL: "SIGILL", SIGTRAP: "SIGTRAP",
    SIGABRT: "SIGABRT", SIGBUS: "SIGBUS", SIGFPE: "SIGFPE", SIGKILL: "SIGKILL",
    SIGUSR1: "SIGUSR1", SIGSEGV: "SIGSEGV", SIGUSR2: "SIGUSR2", SIGPIPE: "SIGPIPE",
    SIGALRM: "SIGALRM", SIGTERM: "SIGTERM", SIGSTKFLT: "SIGSTKFLT", SIGCHLD: "SIGCHLD",
    SIGCONT: "SIGCONT", SIGSTOP: "SIGSTOP", SIGTSTP: "SIGTSTP", SIGTTIN: "SIGTTIN",
    SIGTTOU: "SIGTTOU", SIGURG: "SIGURG", SIGXCPU: "SIGXCPU", SIGXFSZ: "SIGXFSZ",
    SIGVTALRM: "SIGVTALRM", SIGPROF: "SIGPROF", SIGWINCH: "SIGWINCH", SIGIO: "SIGIO",
    SIGPWR: "SIGPWR", SIGSYS: "SIGSYS",
  ]

  /// Throws for a number that is no signal or one this source must not catch.
  static func checkCatchable(_ signal: Int32) throws(LoopError) {
    let value = "\(signal) (\(name(of: signal)))"
    func refuse(_ reason: String) -> LoopError {
      .invalidArgument(name: "signal", value: value, reason: reason)
    }
    switch signal {
    case SIGKILL, SIGSTOP:
      throw refuse("\(name(of: signal)) can be neither caught nor ignored (sigaction: EINVAL)")
    case SIGSEGV, SIGBUS, SIGFPE, SIGILL:
      throw refuse(
        "\(name(of: signal)) is a synchronous fault: the faulting thread must handle it at once "
          + "(returning re-runs the faulting instruction), so it cannot wait for a loop")
    case 1..<SIGSYS + 1, crl_signal_min_realtime()...crl_signal_max_realtime():
      return
    case SIGSYS + 1..<crl_signal_min_realtime():
      throw refuse("the C library keeps this signal for its own threads (sigaction: EINVAL)")
    default:
      throw refuse(
        "signal numbers run from 1 to \(crl_signal_max_realtime()) on this system (EINVAL)")
    }
  }
}

/// A signal source's eventfd and handler slot, shared with its descriptor source's handler
/// (which keeps it alive while the source is in a mode) and told when the source joins its
/// first mode and leaves its last.
final class SignalWatch: DescriptorMembership, @unchecked Sendable {  // state under `lock`
  let signal: Int32
  let eventFD: EventFD
  private let lock = Lock.make()
  /// The handler slot while the source is in a mode.
  private var slot: Int32?
  /// Deliveries counted before the source last left its modes, not yet handed out.
  private var carried: UInt64 = 0
  private var closed = false

  init(signal: Int32) throws(LoopError) {
    self.signal = signal
    self.eventFD = try EventFD()
  }

  func willJoinFirstMode() throws(LoopError) {
    try lock.withLock { () throws(LoopError) in
      guard !closed, slot == nil else { return }
      slot = try SignalRegistry.watch(signal, eventFD: eventFD.fd)
    }
  }

  func didLeaveLastMode() {
    lock.withLock {
      guard let watching = slot else { return }
      slot = nil
      let leftover = SignalRegistry.unwatch(signal, slot: watching)
      guard leftover > 0 else { return }
      carried += leftover
      // The read that would have found these may have happened already: make sure the
      // source fires when it is added again.
      try? eventFD.signal()
    }
  }

  /// The deliveries since the last call. The eventfd is read first: a delivery after the read
  /// is either in this count or writes the fd again (and the next call finds 0 or more).
  func takeDeliveries() -> Int {
    lock.withLock {
      // Invalidated on another thread while this delivery was on its way: the number may
      // name another file by now.
      guard !closed else { return 0 }
      _ = try? eventFD.drain()
      var count = carried
      carried = 0
      if let slot { count += SignalRegistry.take(slot) }
      return Int(clamping: count)
    }
  }

  /// Closes the eventfd; the source has left every mode by now, so no handler writes to it.
  func close() {
    lock.withLock {
      // Still watched only if a concurrent add won the race with the invalidation that led
      // here; the eventfd is then closed by deinit, after the slot is let go.
      guard !closed, slot == nil else { return }
      closed = true
      eventFD.close()
    }
  }
}
