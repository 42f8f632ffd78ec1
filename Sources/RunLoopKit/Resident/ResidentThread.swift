import Glibc
import Synchronization

/// A thread kept alive by its own run loop, ready for work at any time: the pattern iOS code
/// builds from `NSThread` + `NSRunLoop` + a dummy `NSMachPort`, done once and done right.
///
/// Mirrors no single CF type: it is what Foundation's `Thread` plus `RunLoop.run()` are used
/// for. Differences from that pattern, which are the point of this type:
/// - the loop is kept alive by the library (no dummy port to remember), and the thread sleeps
///   in the kernel with no CPU use while idle;
/// - `stop()` really stops it (a plain `RunLoop.run()` can never be stopped), from any thread,
///   including the resident one, after running every block accepted before it;
/// - work sent after `stop()` throws `.stopped` instead of vanishing;
/// - `performAndWait` on the thread itself runs inline instead of deadlocking;
/// - dropping the last reference stops and joins the thread (or detaches it, when the last
///   reference goes away on the thread itself).
///
/// Actors can live on it through `executor` (a `SerialExecutor` and `TaskExecutor`).
///
/// A timer, source or block on the thread's own loop that captures the `ResidentThread`
/// strongly keeps it alive, so "dropping the last reference" never happens: capture it weakly
/// there, or call `stop()` explicitly.
public final class ResidentThread: Sendable {
  let core: ResidentThreadCore
  /// The thread's loop, fixed once `init` returns: `loop` and `perform` reach it without going
  /// through the core's lock (the loop itself refuses posts once `stop()` was called).
  private let residentLoop: Loop

  /// A serial and task executor that runs jobs on this thread — its loop's `Loop.executor`:
  /// give an actor
  /// `nonisolated var unownedExecutor: UnownedSerialExecutor { thread.executor.asUnownedSerialExecutor() }`
  /// or pass it to `Task(executorPreference:)`. Keep the `ResidentThread` alive while it is used.
  public let executor: LoopExecutor

  /// Starts the thread and returns once its loop is running.
  ///
  /// - Parameters:
  ///   - name: at most 15 bytes of UTF-8 (the Linux limit), shown by `top -H`, `ps -L`, gdb.
  ///   - stackSize: bytes; at least 16 KiB and a multiple of the page size. `nil` = default.
  ///   - niceness: the thread's nice value (-20...19; lowering it needs CAP_SYS_NICE).
  ///   - cpuAffinity: CPUs the thread may run on.
  ///   - waitPolicy: how its loop waits when idle (default: sleep at once, no CPU).
  /// - Throws: `LoopError.invalidArgument` for a bad name, stack size, niceness or CPU set —
  ///   before any thread is created — or `.system` if the kernel refuses the configuration.
  public convenience init(
    name: String, stackSize: Int? = nil, niceness: Int32? = nil, cpuAffinity: Set<Int>? = nil,
    waitPolicy: Loop.WaitPolicy = .sleep
  ) throws(LoopError) {
    try self.init(
      configuration: ThreadConfiguration(
        name: name, stackSize: stackSize, niceness: niceness, cpuAffinity: cpuAffinity,
        waitPolicy: waitPolicy))
  }

  /// Starts a thread from a configuration already checked (`ResidentThreadGroup` checks every
  /// thread's before it starts the first).
  init(configuration: ThreadConfiguration) throws(LoopError) {
    core = ResidentThreadCore(configuration: configuration)
    try core.start()
    residentLoop = core.loop
    executor = residentLoop.executor
  }

  deinit {
    core.stop()
    // On the resident thread itself (in a block, or in its thread-exit destructors) nobody
    // could join it: let it clean up alone. Nor is a thread its group already detached
    // waited for (the group was dropped on a sibling thread, which must not wait for it).
    if core.isOwnPthread || core.isDetached {
      core.detach()
    } else {
      core.join()
    }
  }

  /// The name the thread was started with, as `top -H`, `ps -L` and gdb show it.
  public var name: String { core.name }

  /// The thread's run loop: add timers, descriptor sources, ports and observers to it. (Read
  /// without a lock: `thread.loop.perform { … }` costs what `perform` costs.)
  public var loop: Loop { residentLoop }

  /// The kernel's id for the thread (as in `/proc/self/task/<id>`).
  public var threadID: pid_t { core.threadID }

  /// True when called on the resident thread itself.
  public var isCurrent: Bool { core.isCurrent }

  /// True from start until `stop()`.
  public var isRunning: Bool { core.isRunning }

  /// Runs `block` on the thread, after every block this caller posted before it.
  /// - Throws: `.stopped` once `stop()` has been called; the block will not run.
  public func perform(_ block: consuming sending @escaping () -> Void) throws(LoopError) {
    try post(block)
  }

  /// Queues a block in the loop's common modes, or throws `.stopped` once `stop()` was called.
  private func post(_ block: consuming @escaping () -> Void) throws(LoopError) {
    try residentLoop.enqueueFromResident(
      stopped: .stopped(thread: name), Loop.QueuedBlock(modes: .common, block: block))
  }

  /// Runs `block` once on the thread, no earlier than `delay` from now (see
  /// `Loop.perform(after:in:_:)`). `stop()` finishes the plain blocks sent before it, not
  /// delayed ones: a delayed block that has not run when the loop ends — even one already
  /// due — does not run, and its handle says `.abandoned`.
  /// - Returns: a handle whose `cancel()` prevents the block, from any thread.
  /// - Throws: `.stopped` once `stop()` has been called; the block will not run.
  @discardableResult
  public func perform(
    after delay: Duration, _ block: sending @escaping () -> Void
  ) throws(LoopError) -> ScheduledBlock {
    try core.schedule(block, at: .after(delay))
  }

  /// Runs `block` once on the thread at `deadline` or later; otherwise as
  /// `perform(after:_:)`.
  @discardableResult
  public func perform(
    at deadline: LoopClock.Instant, _ block: sending @escaping () -> Void
  ) throws(LoopError) -> ScheduledBlock {
    try core.schedule(block, at: deadline)
  }

  /// Runs `body` on the thread and waits for it; returns its value or rethrows its error.
  /// Called on the resident thread itself, it runs `body` inline.
  /// - Throws: what `body` throws, or `LoopError.stopped` if the thread no longer accepts work.
  public func performAndWait<T: Sendable>(_ body: sending () throws -> T) throws -> T {
    if isCurrent { return try body() }
    return try withoutActuallyEscaping(body) { escapable in
      let handoff = Handoff(escapable)
      do throws(LoopError) {
        try post { handoff.run() }
      } catch {
        handoff.discard()
        throw error
      }
      return try handoff.waitForResult()
    }
  }

  /// Runs `body` on the thread without blocking the caller's thread while it waits.
  ///
  /// Cancellation: a task cancelled before `body` starts on the thread gets `CancellationError`
  /// and `body` never runs. Once `body` has started it runs to the end (it is synchronous, on a
  /// thread outside the task).
  /// - Throws: what `body` throws, `CancellationError`, or `LoopError.stopped` if the thread no
  ///   longer accepts work.
  public func run<T: Sendable>(_ body: sending @escaping () throws -> T) async throws -> T {
    try Task.checkCancellation()
    let cancelled = CancellationFlag()
    return try await withTaskCancellationHandler {
      try await withCheckedThrowingContinuation { continuation in
        do throws(LoopError) {
          try post {
            // Checked on the thread, right before the body: a cancel that lands while the
            // block waits in the queue prevents the body.
            guard !cancelled.isSet else {
              return continuation.resume(throwing: CancellationError())
            }
            continuation.resume(with: Result { try body() })
          }
        } catch {
          continuation.resume(throwing: error)
        }
      }
    } onCancel: {
      cancelled.set()
    }
  }

  /// Suspends the calling task for `duration`, resumed by a one-shot timer on this thread's
  /// loop (see `Loop.sleep(for:tolerance:)`): code isolated to an actor pinned to
  /// `executor`, or a task preferring it, continues on this thread with no job on any other
  /// executor.
  /// - Throws: `CancellationError` when the task is cancelled (the timer goes at once);
  ///   `.stopped` when `stop()` was called before the sleep began; `.loopTornDown` when the
  ///   thread ended before the deadline; `.invalidArgument` for a negative tolerance.
  public nonisolated(nonsending) func sleep(
    for duration: Duration, tolerance: Duration? = nil
  ) async throws {
    guard isRunning else { throw LoopError.stopped(thread: name) }
    try await residentLoop.sleep(for: duration, tolerance: tolerance)
  }

  /// Suspends the calling task until `deadline` on this thread's loop; see
  /// `sleep(for:tolerance:)`.
  public nonisolated(nonsending) func sleep(
    until deadline: LoopClock.Instant, tolerance: Duration? = nil
  ) async throws {
    guard isRunning else { throw LoopError.stopped(thread: name) }
    try await residentLoop.sleep(until: deadline, tolerance: tolerance)
  }

  /// Runs `body` on the thread when it stops: after the last block it accepted, before its
  /// loop is torn down. The place to close what the thread owns, on the thread that owns it
  /// (a database connection opened there, a socket its loop watched). Hooks run in the order
  /// added; the loop takes no more work by then, so a hook that posts to it gets an error.
  /// A hook that captures this thread keeps it alive until `stop()` (dropping the last
  /// reference no longer stops it then): call `stop()` yourself. Such a hook lets go of the
  /// thread on the thread itself, which then finishes on its own instead of being joined.
  /// - Throws: `.stopped` once `stop()` has been called; the hook will not run.
  public func onStop(_ body: sending @escaping () -> Void) throws(LoopError) {
    try core.addStopHook(body)
  }

  /// Lets the blocks already accepted finish, then ends the loop and the thread. Idempotent,
  /// from any thread (on the resident thread it takes effect after the current block).
  public func stop() { core.stop() }

  /// Waits until the thread is gone (its loop torn down, its fds closed). Call `stop()` first,
  /// or it waits until someone does.
  /// - Throws: `.calledOnOwnThread` when called on the resident thread itself.
  public func join() throws(LoopError) {
    if let error = core.join() { throw error }
  }

  /// The thread's private key/value store. Only on the resident thread (traps elsewhere).
  public var storage: ThreadStorage {
    precondition(
      isCurrent,
      "ResidentThread.storage of \"\(name)\" was used on another thread; use it inside perform { }")
    return ThreadStorage.current
  }
}

/// Carries a non-escaping body to the resident thread and its result back, while the caller
/// blocks in `waitForResult`, so the body is never used by two threads at once.
private final class Handoff<T>: @unchecked Sendable {  // fields guarded by `lock`
  private let lock = Lock.make()
  private let done = Condition()
  private var body: (() throws -> T)?
  private var result: Result<T, any Error>?

  init(_ body: @escaping () throws -> T) { self.body = body }

  /// Runs the body on the resident thread. The body is dropped before the waiter is woken:
  /// once `performAndWait` returns, nothing may still hold its non-escaping closure.
  func run() {
    let outcome = runBody()
    lock.withLock {
      result = outcome
      done.broadcast()
    }
  }

  private func runBody() -> Result<T, any Error> {
    guard let body = lock.withLock({ self.body.take() }) else {
      preconditionFailure("performAndWait's body ran twice")
    }
    return Result { try body() }
  }

  /// Drops the body when it was never posted.
  func discard() { lock.withLock { body = nil } }

  func waitForResult() throws -> T {
    try lock.withLock {
      done.wait(on: lock) { result != nil }
      return result!
    }.get()
  }
}

/// Set by a task's cancellation handler, read on the resident thread.
private final class CancellationFlag: Sendable {
  private let flag = Atomic<Bool>(false)
  var isSet: Bool { flag.load(ordering: .acquiring) }
  func set() { flag.store(true, ordering: .releasing) }
}
