import CRunLoopShims
import Glibc

/// A loop as seen by code already running on its thread: the same calls as `Loop` (`perform`,
/// `perform(after:)`, timers, descriptor sources, observers, manual sources), taking plain
/// closures that may capture and mutate non-Sendable state — `self` included — instead of
/// `sending` or `@Sendable` ones. Get it with `loop.assumeIsolated()` or
/// `thread.assumeIsolated()` on that loop's thread.
///
/// What makes it safe: every closure given here runs on the loop's thread, which is where the
/// caller is. The type is not `Sendable`, so the compiler keeps a view on the thread that made
/// it, and each call also compares the calling thread with that one (the address of a
/// thread-local byte: no call, no lock; a virtual loop's view asks its clock who drives it,
/// under a lock), which catches a view carried off by a `sending`
/// hand-over. Each call also takes the caller's `#isolation`: closures written in code
/// isolated to an actor are isolated to it, so that actor must be one whose code may run on
/// this loop's thread (its executor is this loop's, or it is the main actor and this is
/// `Loop.main`). An item armed here and invalidated on another thread lets go of its closure
/// on the loop's thread, so no `deinit` of what it captured runs elsewhere.
///
/// What it does not make safe: the values its closures capture are still ordinary values to
/// the compiler. One that the compiler considers free to hand over (made in a `sending` block
/// or a fresh local) could still be sent to another thread after it was armed here, and then
/// be used on two threads; keep an object that lives on a loop on that loop. The actor check
/// sees the isolation of the calling function: a synchronous helper that is not isolated
/// reports none. SwiftNIO's `assumeIsolated()` has the same limits. After the loop's thread
/// has exited, a view's calls throw (the loop refuses everything) rather than trap.
///
/// ```swift
/// final class Connection {
///   var ticks = 0
///   func start(on loop: Loop) throws {
///     try loop.assumeIsolated().addTimer(after: .milliseconds(10), repeating: .milliseconds(10)) {
///       timer in
///       self.ticks += 1
///       if self.ticks == 3 { timer.invalidate() }
///     }
///   }
/// }
/// ```
///
/// Every rule of the ordinary calls holds: an item is bound to this loop, modes and errors
/// are the same, callouts come in CF's order, and invalidating an item releases its closure
/// (on the loop's thread, as above).
/// Mirrors SwiftNIO's `NIOIsolatedEventLoop` (`eventLoop.assumeIsolated()`); CF has no
/// counterpart, since C callbacks are never checked for thread safety.
public struct IsolatedLoop {
  /// The loop, for the calls that need none of this (`stop`, `wakeUp`, `run`, `remove`).
  public let loop: Loop
  /// Set for `thread.assumeIsolated()`: posts then follow `ResidentThread`'s rules (refused
  /// once `stop()` was called), as `thread.perform` does.
  private let resident: ResidentThreadCore?
  /// The loop's thread, as `crl_thread_marker()` names it there (see `check`).
  private let thread: UnsafeRawPointer

  /// Call on the loop's thread only.
  init(loop: Loop, resident: ResidentThreadCore?) {
    self.loop = loop
    self.resident = resident
    self.thread = crl_thread_marker()
  }

  // MARK: Blocks

  /// Queues `block` for the common modes, as `Loop.perform(_:)` does; it runs on a later
  /// drain of this loop, never inside this call.
  /// - Throws: as `Loop.perform(_:)`; from `thread.assumeIsolated()`, `.stopped` once the
  ///   thread's `stop()` was called, as `ResidentThread.perform(_:)`.
  public func perform(
    isolation: (any Actor)? = #isolation, _ block: consuming @escaping () -> Void
  ) throws(LoopError) {
    check("perform(_:)", isolation)
    try enqueue(Loop.QueuedBlock(modes: .common, block: block))
  }

  /// Queues `block` for one mode (`.common`: every common mode); as `Loop.perform(in:_:)`.
  public func perform(
    in mode: Loop.Mode, isolation: (any Actor)? = #isolation,
    _ block: consuming @escaping () -> Void
  ) throws(LoopError) {
    check("perform(in:_:)", isolation)
    try Loop.checkNamed(mode)
    try enqueue(Loop.QueuedBlock(modes: Loop.QueuedBlock.Modes(mode), block: block))
  }

  /// Queues `block` for several modes; as `Loop.perform(in:_:)` with a list.
  public func perform(
    in modes: [Loop.Mode], isolation: (any Actor)? = #isolation,
    _ block: consuming @escaping () -> Void
  ) throws(LoopError) {
    check("perform(in:_:)", isolation)
    try Loop.checkRunnable(modes)
    try enqueue(Loop.QueuedBlock(modes: Loop.QueuedBlock.Modes(modes), block: block))
  }

  /// Runs `block` once on this loop no earlier than `delay` from now; as
  /// `Loop.perform(after:in:_:)`.
  /// - Returns: the handle that cancels it from any thread.
  @discardableResult
  public func perform(
    after delay: Duration, in modes: [Loop.Mode] = [.common],
    isolation: (any Actor)? = #isolation, _ block: @escaping () -> Void
  ) throws(LoopError) -> ScheduledBlock {
    check("perform(after:in:_:)", isolation)
    return try schedule(block, at: loop.instant(after: delay), in: modes)
  }

  /// Runs `block` once on this loop at `deadline` or later; as `Loop.perform(at:in:_:)`.
  @discardableResult
  public func perform(
    at deadline: LoopClock.Instant, in modes: [Loop.Mode] = [.common],
    isolation: (any Actor)? = #isolation, _ block: @escaping () -> Void
  ) throws(LoopError) -> ScheduledBlock {
    check("perform(at:in:_:)", isolation)
    return try schedule(block, at: deadline, in: modes)
  }

  // MARK: Items

  /// Makes a timer that first fires `delay` from now and adds it to `mode`; as
  /// `LoopTimer(after:repeating:tolerance:handler:)` followed by `loop.add(_:to:)`.
  /// - Returns: the timer, to invalidate it or move its fire date.
  /// - Throws: what either of those throws; when the add fails, the timer is invalidated and
  ///   its handler released.
  @discardableResult
  public func addTimer(
    label: String? = nil, after delay: Duration, repeating interval: Duration? = nil,
    tolerance: Duration = .zero, to mode: Loop.Mode = .default,
    isolation: (any Actor)? = #isolation, _ handler: @escaping (LoopTimer) -> Void
  ) throws(LoopError) -> LoopTimer {
    check("addTimer(after:repeating:tolerance:to:_:)", isolation)
    return try addTimer(label, loop.instant(after: delay), interval, tolerance, mode, handler)
  }

  /// Makes a timer that first fires at `fireDate` and adds it to `mode`; as
  /// `LoopTimer(fireAt:interval:tolerance:handler:)` followed by `loop.add(_:to:)`.
  @discardableResult
  public func addTimer(
    label: String? = nil, fireAt fireDate: LoopClock.Instant, repeating interval: Duration? = nil,
    tolerance: Duration = .zero, to mode: Loop.Mode = .default,
    isolation: (any Actor)? = #isolation, _ handler: @escaping (LoopTimer) -> Void
  ) throws(LoopError) -> LoopTimer {
    check("addTimer(fireAt:repeating:tolerance:to:_:)", isolation)
    return try addTimer(label, fireDate, interval, tolerance, mode, handler)
  }

  /// Watches `fileDescriptor` in `mode`; as `DescriptorSource(fileDescriptor:…)` followed by
  /// `loop.add(_:to:)`. The source does not own the descriptor.
  /// - Throws: as `loop.add(_:to:)` for a descriptor source (a closed, invalid or regular
  ///   file's fd names the fd and the errno); nothing is left registered then.
  @discardableResult
  public func addSource(
    fileDescriptor: Int32, label: String? = nil,
    interest: DescriptorSource.Events = .readable, order: Int = 0,
    to mode: Loop.Mode = .default, isolation: (any Actor)? = #isolation,
    _ handler: @escaping (DescriptorSource, DescriptorSource.Events) -> Void
  ) throws(LoopError) -> DescriptorSource {
    check("addSource(fileDescriptor:interest:to:_:)", isolation)
    let source = DescriptorSource(
      fileDescriptor: fileDescriptor, label: label, interest: interest, order: order,
      onTeardown: nil, releasesOnLoopThread: true, handler: handler)
    return try adding(source) { (source) throws(LoopError) in try loop.add(source, to: mode) }
  }

  /// Adds an observer of `activities` to `mode`; as `LoopObserver(activities:…)` followed by
  /// `loop.add(_:to:)`.
  @discardableResult
  public func addObserver(
    _ activities: Loop.Activity, repeats: Bool = true, order: Int = 0,
    to mode: Loop.Mode = .default, isolation: (any Actor)? = #isolation,
    _ handler: @escaping (LoopObserver, Loop.Activity) -> Void
  ) throws(LoopError) -> LoopObserver {
    check("addObserver(_:repeats:order:to:_:)", isolation)
    let observer = LoopObserver(
      activities: activities, repeats: repeats, order: order, isolatedHandler: handler,
      releasesOnLoopThread: true)
    return try adding(observer) { (observer) throws(LoopError) in
      try loop.add(observer, to: mode)
    }
  }

  /// Adds a manual source (CF's source0) whose `perform` runs when it is signalled; as
  /// `ManualSource(label:order:perform:)` followed by `loop.add(_:to:)`. Signal it from any
  /// thread (and wake the loop, or use `signalAndWake()`).
  @discardableResult
  public func addManualSource(
    label: String? = nil, order: Int = 0, to mode: Loop.Mode = .default,
    isolation: (any Actor)? = #isolation, perform: @escaping () -> Void
  ) throws(LoopError) -> ManualSource {
    check("addManualSource(label:order:to:perform:)", isolation)
    let source = ManualSource(
      label: label, order: order, isolatedPerform: perform, releasesOnLoopThread: true)
    return try adding(source) { (source) throws(LoopError) in try loop.add(source, to: mode) }
  }

  /// Makes a port whose handler receives every message sent to it, in order, and adds it to
  /// `mode`; as `LoopPort(label:order:handler:)` followed by `loop.add(_:to:)`. Send to it from
  /// any thread.
  @discardableResult
  public func addPort<Message: Sendable>(
    of type: Message.Type = Message.self, label: String? = nil, order: Int = 0,
    to mode: Loop.Mode = .default, isolation: (any Actor)? = #isolation,
    _ handler: @escaping (Message) -> Void
  ) throws(LoopError) -> LoopPort<Message> {
    check("addPort(label:order:to:_:)", isolation)
    let port = try LoopPort<Message>(
      label: label, order: order, isolatedHandler: handler, releasesOnLoopThread: true)
    let invalidate = { _ = port.invalidate() }
    return try adding(port, invalidate: invalidate) { () throws(LoopError) in
      try loop.add(port, to: mode)
    }
  }

  // MARK: - The shared part

  @inline(__always)
  private func enqueue(_ queued: consuming Loop.QueuedBlock) throws(LoopError) {
    if let resident {
      try loop.enqueueFromResident(stopped: .stopped(thread: resident.name), queued)
    } else {
      try loop.enqueue(queued)
    }
  }

  private func schedule(
    _ block: @escaping () -> Void, at deadline: LoopClock.Instant, in modes: [Loop.Mode]
  ) throws(LoopError) -> ScheduledBlock {
    if let resident {
      return try resident.schedule(block, at: deadline, in: modes, releasesOnLoopThread: true)
    }
    return try loop.schedule(block, at: deadline, in: modes, releasesOnLoopThread: true)
  }

  /// Both `addTimer`s: makes the timer and adds it on this thread, where nothing else can
  /// reach it yet (so binding it takes no lock of its own: `Loop.addFreshTimer`).
  private func addTimer(
    _ label: String?, _ fireDate: LoopClock.Instant, _ interval: Duration?,
    _ tolerance: Duration, _ mode: Loop.Mode, _ handler: @escaping (LoopTimer) -> Void
  ) throws(LoopError) -> LoopTimer {
    let timer = try LoopTimer(
      label: label, firstFireAt: fireDate, interval: interval, tolerance: tolerance,
      releasesOnLoopThread: true, handler: handler)
    // `adding`'s rule written out: its closures capture the timer, two retains and a release
    // per timer that arming a million should not pay.
    do {
      try loop.addFreshTimer(timer, to: mode)
    } catch {
      timer.invalidate()
      throw error
    }
    return timer
  }

  /// Adds a fresh item with `add`, or invalidates it (releasing its closure) when that throws.
  private func adding<Item: LoopItem>(
    _ item: Item, _ add: (Item) throws(LoopError) -> Void
  ) throws(LoopError) -> Item {
    try adding(item, invalidate: item.invalidate) { () throws(LoopError) in try add(item) }
  }

  /// Returns a fresh `item` once `add` succeeded; calls `invalidate` (which releases its
  /// closures, and a port's or signal source's descriptor) when `add` throws.
  func adding<Item>(
    _ item: Item, invalidate: () -> Void, _ add: () throws(LoopError) -> Void
  ) throws(LoopError) -> Item {
    do {
      try add()
    } catch {
      invalidate()
      throw error
    }
    return item
  }

  /// The per-call check. The view is not Sendable, but a `sending` hand-over (into another
  /// thread's `perform`, a `Task`) could still carry it off the thread: one compare of the
  /// calling thread's marker with the one recorded here catches that, at next to no cost
  /// (`pthread_self` and `pthread_equal` instead, two calls into libc, cost a fifth of a
  /// post, measured). A caller isolated to an actor makes closures isolated to that actor,
  /// which is sound only if this loop's thread is that actor's (see
  /// `Loop.runsCode(isolatedTo:)`); a nonisolated caller passes nil. A virtual loop's thread
  /// is whichever thread drives it (see `VirtualClock.claimForView`), so its views follow
  /// the drive instead: an async test may resume elsewhere and keep them, and a view used
  /// while another thread drives traps, on the thread that made it too.
  @inline(__always)
  func check(_ operation: @autoclosure () -> String, _ isolation: (any Actor)?) {
    let onThread = loop.virtualClock?.claimForView() ?? (crl_thread_marker() == thread)
    if !onThread {
      loop.trapOffThread(
        "IsolatedLoop.\(operation())",
        advice: loop.isVirtual
          ? "Another thread drives the VirtualLoop now: use its views in that drive's callouts "
            + "(runTask, advance, asCurrent) or after it returns, or post with loop.perform."
          : "A view from assumeIsolated() must stay on the thread that made it: call "
            + "assumeIsolated() again where the code runs, or hand the work over with "
            + "loop.perform.")
    }
    if let isolation { loop.requireRunsCode(isolatedTo: isolation, for: operation()) }
  }
}

@available(*, unavailable, message: "an IsolatedLoop is only valid on its loop's thread")
extension IsolatedLoop: Sendable {}

extension Loop {
  /// Checks once that the caller runs on this loop's thread and returns a view whose calls
  /// take plain closures: code that lives on the loop arms its own timers and sources with
  /// closures that capture `self`. Traps anywhere else, naming both threads. Mirrors SwiftNIO's
  /// `EventLoop.assumeIsolated()`.
  @available(
    *, noasync,
    message:
      "an async function may resume on another thread; call assumeIsolated() from the loop's own callbacks or a synchronous function they call"
  )
  public func assumeIsolated(
    isolation: (any Actor)? = #isolation, file: StaticString = #fileID, line: UInt = #line
  ) -> IsolatedLoop {
    IsolatedLoop(
      checking: self, resident: nil, isolation: isolation, entry: "Loop.assumeIsolated()",
      advice: "Call it from this loop's own callbacks (a block, timer, source or observer "
        + "of this loop), or hand the work there with loop.perform { … }.", file: file,
      line: line)
  }
}

extension ResidentThread {
  /// `loop.assumeIsolated()` for the resident thread's loop: checked once, trapping off the
  /// thread with a message naming both threads. Blocks posted through the view follow this
  /// thread's rules: refused with `.stopped` once `stop()` was called.
  @available(
    *, noasync,
    message:
      "an async function may resume on another thread; call assumeIsolated() from the thread's own callbacks or a synchronous function they call"
  )
  public func assumeIsolated(
    isolation: (any Actor)? = #isolation, file: StaticString = #fileID, line: UInt = #line
  ) -> IsolatedLoop {
    IsolatedLoop(
      checking: loop, resident: core, isolation: isolation,
      entry: "ResidentThread(\"\(name)\").assumeIsolated()",
      advice: "Call it inside thread.perform { … } or a timer or source of that thread, "
        + "where the code it serves runs.", file: file, line: line)
  }
}

extension IsolatedLoop {
  /// The entry check of both `assumeIsolated()`s: the caller is on the loop's thread, and the
  /// actor it is isolated to, if any, is one whose code may run in the loop's callbacks.
  init(
    checking loop: Loop, resident: ResidentThreadCore?, isolation: (any Actor)?,
    entry: String, advice: String, file: StaticString, line: UInt
  ) {
    let onThread = resident?.isCurrent ?? loop.virtualClock?.claimForView() ?? loop.isCurrent
    if !onThread {
      loop.trapOffThread(entry, advice: advice, file: file, line: line)
    }
    if let isolation { loop.requireRunsCode(isolatedTo: isolation, for: entry) }
    self.init(loop: loop, resident: resident)
  }
}

extension Loop {
  /// Whether code isolated to `actor` may run in this loop's plain callbacks (blocks, timers,
  /// sources, observers), outside the actor's jobs: true when being on this loop's thread
  /// means being isolated to the actor — its executor is this loop's, or it is the main actor
  /// and this is the main thread's loop.
  func runsCode(isolatedTo actor: any Actor) -> Bool {
    if actor is MainActor {
      return virtualClock == nil && pthread_equal(thread, crl_main_thread()) != 0
    }
    guard let executor = actor.unownedExecutor.asSerialExecutor() as? LoopExecutor else {
      return false
    }
    return executor.loop === self
  }

  /// Traps unless `runsCode(isolatedTo:)`, naming the actor, the loop and what to do.
  func requireRunsCode(isolatedTo actor: any Actor, for operation: @autoclosure () -> String) {
    guard !runsCode(isolatedTo: actor) else { return }
    fatalError(
      "RunLoopKit: \(operation()) was called from code isolated to \(type(of: actor)), whose "
        + "executor is not the loop of \(threadDescription): closures made there are isolated "
        + "to that actor and would run on this loop's thread outside it. Pin the actor to this "
        + "loop (unownedExecutor: loop.executor.asUnownedSerialExecutor()), or hand the work "
        + "to the loop from outside the actor with loop.perform { … }.")
  }
}
