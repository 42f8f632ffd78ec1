/// A loop run from inside another event loop: GLib's main loop, a libuv loop, a GUI toolkit's.
///
/// The host watches ``descriptor`` (readable whenever the embedded mode has work: a block
/// posted, a source signalled, a descriptor ready, a timer due, the main queue on
/// ``Loop/main``), wakes by ``nextDeadline`` even if the descriptor stays quiet, and then calls
/// ``runPass()`` on the loop's thread: one pass that never sleeps. Between passes the loop
/// counts as asleep, so whoever posts to it writes its wake-up `eventfd`, which the
/// descriptor reports; an idle embedded loop costs no CPU and no periodic wake-up.
///
/// ```swift
/// let embedding = try Loop.main.makeEmbedding()
/// // host: poll embedding.descriptor for input, with a timeout until embedding.nextDeadline;
/// // when it is readable or the timeout passed:
/// embedding.runPass()
/// ```
///
/// The descriptor is an epoll set holding the mode's own epoll set, which is itself pollable
/// (libuv's `uv_backend_fd()` is the same idea); the extra level keeps the number the same
/// when the loop rebuilds the mode's set. A mode that would sleep on the loop's futex uses
/// its eventfd and timerfd while embedded, so the descriptor sees every wake-up.
///
/// On ``Loop/main`` the main queue and the main actor are served in the common modes: embed
/// one of them (`.default` is). If the loop cannot rebuild the mode's epoll set after a
/// descriptor was closed behind its source's back and the process is out of descriptors, the
/// mode falls back to short sleeps and the descriptor may stay readable: the host then runs
/// passes back to back until the loop recovers.
///
/// Mirrors no CF type: CFRunLoop cannot be driven from outside. Its counterpart is
/// `CFRunLoopRunInMode(mode, 0, false)` called whenever a host notices work, which CF gives no
/// way to notice.
public final class LoopEmbedding: Sendable {
  /// The loop this embedding runs.
  public let loop: Loop
  /// The embedded mode.
  public let mode: Loop.Mode
  /// The file descriptor the host watches for input (`POLLIN` / `G_IO_IN` / `EPOLLIN`), an
  /// epoll set. Owned by the loop: the host must not read or close it, and must stop watching
  /// it before `invalidate()`, which closes it (its number may then be reused).
  public let descriptor: Int32

  init(loop: Loop, mode: Loop.Mode, descriptor: Int32) {
    self.loop = loop
    self.mode = mode
    self.descriptor = descriptor
  }

  deinit { loop.endEmbedding(of: mode) }

  /// When the loop must run a pass even if ``descriptor`` stays quiet: its next timer's date
  /// (tolerance included), or nil when no timer is pending. A host waits at most until then.
  /// (The timerfd makes the descriptor readable at that date too; this lets a host that
  /// polls with a timeout, such as GLib's `prepare`, say so.) Safe from any thread.
  public var nextDeadline: LoopClock.Instant? { loop.embeddedDeadline(of: mode) }

  /// ``nextDeadline`` as the timeout that `poll(2)`, `epoll_wait(2)` and a GLib `GSource`'s
  /// `prepare` take: the milliseconds from now until it, rounded up so the host never wakes
  /// before it; 0 once it has passed; -1 (wait for the descriptor alone) when no timer is
  /// pending, in an empty mode too. libuv's `uv_backend_timeout()` is the same number for a
  /// loop with something alive in it; for one with nothing alive libuv answers 0, since its
  /// loop is about to end, where an empty embedded mode is only idle: it keeps its
  /// descriptor, and anything added to it later makes that readable. Safe from any thread.
  public var pollTimeout: Int32 {
    guard let deadline = nextDeadline else { return -1 }
    return Self.milliseconds(from: .now, to: deadline)
  }

  /// Whole milliseconds from `now` to `deadline`, rounded up, at least 0, at most `Int32.max`.
  static func milliseconds(from now: LoopClock.Instant, to deadline: LoopClock.Instant) -> Int32 {
    let (nanoseconds, overflow) = deadline.nanoseconds.subtractingReportingOverflow(now.nanoseconds)
    if overflow { return deadline > now ? .max : 0 }
    guard nanoseconds > 0 else { return 0 }
    let roundedUp = nanoseconds / 1_000_000 + (nanoseconds % 1_000_000 == 0 ? 0 : 1)
    return Int32(clamping: roundedUp)
  }

  /// Runs one pass of the mode that never sleeps, as `CFRunLoopRunInMode(mode, 0, false)`
  /// does: entry and exit observers, blocks, signalled sources, ready descriptors and due
  /// timers, in CF's order, then returns. Call it on the loop's thread whenever
  /// ``descriptor`` is readable or ``nextDeadline`` has passed; calling it at other times
  /// does no harm. After ``invalidate()`` it does nothing and returns `.finished`.
  @discardableResult
  public func runPass() -> Loop.RunResult {
    loop.runEmbeddedPass(of: mode)
  }

  /// Ends the embedding: the mode sleeps as it did before, and ``descriptor`` is no longer
  /// for the host to watch. Idempotent; also done when the embedding is released.
  public func invalidate() { loop.endEmbedding(of: mode) }
}
