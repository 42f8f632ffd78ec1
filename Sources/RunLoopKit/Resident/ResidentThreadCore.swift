import CRunLoopShims
import Glibc

/// The state a resident thread shares between its handle (`ResidentThread`), its executor and
/// the thread itself. The handle's `deinit` stops and joins the thread, so the thread's own
/// body must never hold the handle: it holds this core instead.
///
/// Lifecycle: `starting` → `running` → `stopping` (after `stop()`: nothing new is accepted,
/// everything accepted before runs) → `exited` (the loop ended and the last blocks ran).
final class ResidentThreadCore: @unchecked Sendable {  // mutable state guarded by `lock`
  enum State { case starting, running, stopping, exited }

  let configuration: ThreadConfiguration
  let lock = Lock.make()
  private let changed = Condition()

  private var state = State.starting
  private var startError: LoopError?
  private var storedLoop: Loop?
  private var storedThreadID: pid_t = 0
  private var exitRequested = false
  /// Run on the thread after its final drain (`ResidentThread.onStop`), in the order added.
  private var stopHooks: [() -> Void] = []
  /// pthread_join may be called once; later joiners wait for the first to finish.
  private var joinStarted = false
  private var joined = false
  private var detached = false
  var thread = pthread_t()

  init(configuration: ThreadConfiguration) {
    self.configuration = configuration
  }

  var name: String { configuration.name }

  /// Creates the pthread and waits until it runs its loop (or failed to set itself up).
  func start() throws(LoopError) {
    let context = Unmanaged.passRetained(self).toOpaque()
    let result = crl_thread_create(
      &thread, configuration.allocatedStackSize ?? 0,
      { raw in
        let core = Unmanaged<ResidentThreadCore>.fromOpaque(raw!).takeRetainedValue()
        core.main()
        return nil
      }, context)
    guard result == 0 else {
      Unmanaged<ResidentThreadCore>.fromOpaque(context).release()
      // No thread exists: mark it exited and joined so the handle's deinit does not wait.
      lock.withLock {
        state = .exited
        joinStarted = true
        joined = true
        changed.broadcast()
      }
      throw .system(
        SystemError(operation: "pthread_create", subject: "thread \"\(name)\"", errno: result))
    }
    let error = lock.withLock { () -> LoopError? in
      changed.wait(on: lock) { state != .starting }
      return startError
    }
    if let error {
      _ = join(fromHandle: true)
      throw error
    }
  }

  // MARK: - The thread

  /// The resident thread's whole life: set up, run the loop until stopped, run what is left.
  private func main() {
    // Marks this thread as this core's, for `isCurrent`. A pthread_t alone cannot say that:
    // glibc hands a joined thread's pthread_t to the next thread it creates.
    pthread_setspecific(residentCoreKey, Unmanaged.passUnretained(self).toOpaque())
    defer { pthread_setspecific(residentCoreKey, nil) }
    let keepAlive: ManualSource
    let loop: Loop
    do {
      try configuration.applyToCurrentThread()
      loop = Loop.current
      loop.waitPolicy = configuration.waitPolicy
      // The library's own never-signalled source: it keeps the default mode alive, so the
      // thread sleeps in the kernel with nothing to do instead of returning at once.
      keepAlive = ManualSource(label: "keep-alive") {}
      try loop.add(keepAlive, to: .default)
    } catch {
      lock.withLock {
        startError = error
        state = .exited
        changed.broadcast()
      }
      return
    }
    lock.withLock {
      storedLoop = loop
      storedThreadID = crl_gettid()
      state = .running
      changed.broadcast()
    }
    // `run()` alone could never be stopped for good (any stop only ends one run); the loop
    // goes round until the stop block queued by `stop()` has run.
    while !lock.withLock({ exitRequested }) {
      loop.run(in: .default)
    }
    // Anything accepted before the loop closed still runs (blocks posted straight to the
    // loop, executor jobs of tasks that were in flight); once none are left, posts throw.
    keepAlive.invalidate()
    loop.runAcceptedWorkBeforeExit()
    // Last, so a hook may close what the blocks above still used; the loop takes no work now.
    let hooks = lock.withLock { () -> [() -> Void] in
      defer { stopHooks = [] }
      return stopHooks
    }
    for hook in hooks { hook() }
    lock.withLock {
      state = .exited
      changed.broadcast()
    }
  }

  // MARK: - Posting

  var loop: Loop {
    lock.withLock {
      guard let storedLoop else { preconditionFailure("resident thread \(name) has no loop yet") }
      return storedLoop
    }
  }

  var threadID: pid_t { lock.withLock { storedThreadID } }

  var isCurrent: Bool { ResidentThreadCore.currentIdentity == identity }

  /// Who this core is, to compare with `currentIdentity` (an unretained pointer, never
  /// dereferenced).
  var identity: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

  /// The `identity` of the resident thread the caller is on, nil on any other thread: one
  /// thread-specific read, however many resident threads there are.
  static var currentIdentity: UnsafeMutableRawPointer? { pthread_getspecific(residentCoreKey) }

  /// True on the pthread this core created, even during its thread-exit destructors (when
  /// `isCurrent` is already false). Only meaningful before that thread has been joined.
  var isOwnPthread: Bool { pthread_equal(pthread_self(), thread) != 0 }

  var isRunning: Bool { lock.withLock { state == .running } }

  /// Schedules a delayed block, or throws if the thread no longer accepts work; checked and
  /// scheduled under one hold of the core's lock, which `stop()` takes too.
  func schedule(
    _ block: @escaping () -> Void, at deadline: LoopClock.Instant,
    in modes: [Loop.Mode] = [.common], releasesOnLoopThread: Bool = false
  ) throws(LoopError) -> ScheduledBlock {
    try lock.withLock { () throws(LoopError) -> ScheduledBlock in
      guard state == .running, let storedLoop else { throw .stopped(thread: name) }
      return try storedLoop.schedule(
        block, at: deadline, in: modes, releasesOnLoopThread: releasesOnLoopThread)
    }
  }

  /// `ResidentThread.performAsSource`: queued while the thread accepts work, or `.stopped`
  /// (checked under the lock `stop()` takes, so an accepted block is queued before the stop's
  /// own block, and runs).
  func performAsSource(
    _ block: sending @escaping () -> Void, in modes: [Loop.Mode]
  ) throws(LoopError) {
    lock.lock()
    defer { lock.unlock() }
    guard state == .running, let storedLoop else { throw .stopped(thread: name) }
    try storedLoop.performAsSource(in: modes, block)
  }

  /// Adds a hook for the thread's end, or throws once `stop()` was called (checked under the
  /// lock `stop()` takes, so a hook is either refused or run).
  func addStopHook(_ hook: @escaping () -> Void) throws(LoopError) {
    try lock.withLock { () throws(LoopError) in
      guard state == .running else { throw .stopped(thread: name) }
      stopHooks.append(hook)
    }
  }

  /// Asks the thread to finish the work already accepted, then end. Idempotent; any thread.
  /// The stop block runs in whichever mode the loop runs next, so a nested run in a mode that
  /// is not common cannot hold the thread up.
  func stop() {
    lock.withLock {
      guard state == .running, let storedLoop else { return }
      state = .stopping
      storedLoop.queueResidentStop { [self] in
        lock.withLock { exitRequested = true }
        storedLoop.stopAllRuns()
      }
    }
  }

  // MARK: - Joining

  /// Waits until the thread has exited and its loop was torn down. `fromHandle` joins even a
  /// thread that failed to start; callers on the thread itself are refused.
  @discardableResult
  func join(fromHandle: Bool = false) -> LoopError? {
    if isCurrent { return .calledOnOwnThread(operation: "join()", thread: name) }
    let doJoin = lock.withLock { () -> Bool in
      changed.wait(on: lock) { state == .exited }
      if detached { return false }
      if joinStarted {
        changed.wait(on: lock) { joined }
        return false
      }
      joinStarted = true
      return true
    }
    guard doJoin else { return nil }
    // Returns once the thread is gone, after its TLS destructors tore the loop down.
    pthread_join(thread, nil)
    lock.withLock {
      joined = true
      changed.broadcast()
    }
    return nil
  }

  /// True once `detach()` went ahead: nobody will join the thread.
  var isDetached: Bool { lock.withLock { detached } }

  /// For a handle dropped on the thread itself (or a group dropped on one of its threads):
  /// nobody can join it, so let it clean up alone. Does nothing once a join has begun.
  func detach() {
    let first = lock.withLock { () -> Bool in
      guard !joinStarted, !detached else { return false }
      detached = true
      return true
    }
    // Once only: detaching a thread twice (or one being joined) is undefined behaviour.
    if first { pthread_detach(thread) }
  }
}

/// Which resident thread (if any) the calling thread is: set for the life of its `main()`.
private let residentCoreKey: pthread_key_t = {
  var key = pthread_key_t()
  let result = pthread_key_create(&key, nil)
  precondition(result == 0, "pthread_key_create failed with \(result)")
  return key
}()
