/// Posting work to a loop from any thread: `perform` and the resident thread's posts, and the
/// wake-up they send to a sleeping loop (an eventfd write or a futex wake, at most one per
/// sleep). Mirrors `CFRunLoopPerformBlock` and `CFRunLoopWakeUp`, except that a post wakes
/// the loop and is refused, not dropped, once the loop's thread has exited.
extension Loop {
  /// Queues `block` to run on the loop's thread the next time it runs in one of `modes`
  /// (`.common` means every mode in the common set), and wakes the loop. Blocks run in the
  /// order they were queued. Throws if the loop was torn down (its thread exited), so a block
  /// is never dropped without the caller knowing.
  ///
  /// - Throws: `LoopError.loopTornDown` once the loop's thread has exited,
  ///   `.invalidArgument` for an empty list of modes and `.invalidMode` for an empty mode
  ///   name (a block for no mode could never run), as `perform(after:in:_:)` does.
  public func perform(
    in modes: [Mode], _ block: consuming sending @escaping () -> Void
  ) throws(LoopError) {
    try Loop.checkRunnable(modes)
    try enqueue(QueuedBlock(modes: QueuedBlock.Modes(modes), block: block))
  }

  /// Queues `block` for one mode (`.common`: every common mode) and wakes the loop. Throws
  /// as `perform(in:_:)` with a list.
  public func perform(
    in mode: Mode, _ block: consuming sending @escaping () -> Void
  ) throws(LoopError) {
    try Loop.checkNamed(mode)
    try enqueue(QueuedBlock(modes: QueuedBlock.Modes(mode), block: block))
  }

  /// What queuing a block for later (`perform(in:)`, `perform(after:in:)`) requires of its
  /// modes: at least one, each with a name.
  static func checkRunnable(_ modes: [Mode]) throws(LoopError) {
    guard !modes.isEmpty else {
      throw .invalidArgument(
        name: "modes", value: "[]", reason: "a block needs at least one mode to run in")
    }
    for mode in modes { try checkNamed(mode) }
  }

  /// Every mode a block or an item is given needs a name. (The predefined modes are told
  /// apart first, so posting to them compares no string.)
  @inline(__always)
  static func checkNamed(_ mode: Mode) throws(LoopError) {
    if mode.predefined == .none, mode.name.isEmpty { throw .invalidMode(name: "") }
  }

  /// Queues `block` for the common modes and wakes the loop.
  public func perform(_ block: consuming sending @escaping () -> Void) throws(LoopError) {
    try enqueue(QueuedBlock(modes: .common, block: block))
  }

  /// `ResidentThread.perform`: the thread's state check and the enqueue under one lock hold,
  /// so a post lands either before the stop block (and runs) or throws `stopped`, never
  /// neither.
  func enqueueFromResident(
    stopped: @autoclosure () -> LoopError, _ queued: consuming QueuedBlock
  ) throws(LoopError) {
    try enqueue(queued) {
      residentStopped || tornDown || refusingPosts ? stopped() : nil
    }
  }

  /// Queues `queued` and wakes the loop, unless `refusal` (asked under the lock) or the loop's
  /// teardown says no.
  func enqueue(
    _ queued: consuming QueuedBlock, refusal: () -> LoopError? = { nil }
  ) throws(LoopError) {
    // Locked by hand rather than with `withLock`: `queued` moves into the queue, and a
    // closure could only copy it (one more retain and release of the block per post).
    lock.lock()
    if let error = refusal() {
      lock.unlock()
      throw error
    }
    guard !tornDown && !refusingPosts else {
      lock.unlock()
      throw .loopTornDown(thread: threadDescription)
    }
    blocks.append(queued)
    let signal = requestWakeLocked()
    lock.unlock()
    send(signal)
  }

  /// How a caller of `requestWakeLocked` must wake the loop once it has released the lock.
  enum WakeSignal {
    case none
    case eventfd
    case futex
  }

  /// Posters wake the loop only when it sleeps and no wake-up is pending yet; a busy loop is
  /// told with a flag instead, which its next wait checks. So a burst of posts to a busy loop
  /// costs no syscalls, and one to a sleeping loop costs exactly one: an eventfd write when
  /// the loop sleeps in `epoll_wait`, a futex wake when it sleeps on its futex.
  ///
  /// Returns what the caller must pass to `send(_:)` once it has released the lock. The
  /// syscall happens outside the lock because the loop it wakes takes that lock first thing:
  /// waking it while holding the lock would make the woken thread block on the lock straight
  /// away and be woken a second time (measured: several microseconds per wake).
  func requestWakeLocked() -> WakeSignal {
    guard !tornDown else { return .none }
    guard sleeping else {
      wakeRequested = true
      wakePending.store(true, ordering: .releasing)
      return .none
    }
    guard !wakeWritten else { return .none }
    wakeWritten = true
    wakeWrites += 1
    // The adaptive policy learns when work arrived, not when the woken loop saw it.
    if policy == .adaptive { wakeAskedAt = .now }
    if sleepingOnFutex {
      // Counted under the lock the sleeper read the count under: a sleep that has not begun
      // yet sees the new count and does not begin.
      futex.increment()
      return .futex
    }
    wakeFDWritten = true
    // Teardown (which sets tornDown under this lock) waits for it before closing the eventfd.
    wakeFD?.reserveSignal()
    return .eventfd
  }

  /// The deferred half of `requestWakeLocked`, once the lock is released.
  func send(_ signal: WakeSignal) {
    if case .eventfd = signal { TestPausePoint.reach(.wakeWriteDecided, by: self) }
    sendHoldingLock(signal)
  }

  /// `send(_:)` for the rare callers that wake the loop while still holding its lock.
  func sendHoldingLock(_ signal: WakeSignal) {
    switch signal {
    case .none: return
    case .futex: futex.wake()
    case .eventfd:
      do {
        // Set (for good) before `requestWakeLocked` chose the eventfd, which only a loop
        // asleep in a mode's epoll set makes it do.
        try wakeFD?.completeSignal()
      } catch {
        preconditionFailure("waking the loop of \(threadDescription) failed: \(error)")
      }
    }
  }

  /// A resident thread's stop: queues its stop block (in any mode) and, under the same lock
  /// hold, refuses the thread's later posts (`enqueueFromResident`).
  func queueResidentStop(_ block: @escaping () -> Void) {
    let signal = lock.withLock { () -> WakeSignal in
      residentStopped = true
      guard !tornDown && !refusingPosts else { return .none }
      blocks.append(QueuedBlock(modes: .any, block: block))
      return requestWakeLocked()
    }
    send(signal)
  }

  /// For a thread about to exit: hands back the blocks still queued so it can run them itself
  /// instead of letting teardown discard them, or, when none are left, refuses every later
  /// `perform`. Call it until it returns nothing: blocks run from one batch may post more.
  /// (`runAcceptedWorkBeforeExit` does.)
  func takeQueuedBlocksOrClose() -> [QueuedBlock] {
    var held: [QueuedBlock] = []
    swap(&held, &jobs.held)  // only if the thread exits from inside a job, which is rare
    return lock.withLock {
      if held.isEmpty && blocks.isEmpty && deferredBlocks.isEmpty { refusingPosts = true }
      defer {
        blocks = []
        deferredBlocks = []
      }
      return held + deferredBlocks + blocks
    }
  }
}

extension Loop {
  /// Lets go of an item's closures on this loop's thread. Closures given through
  /// `IsolatedLoop` share what they capture with the loop's other callbacks (`self`, most
  /// often), so releasing them — and running the `deinit`s that may follow — on the thread
  /// that invalidated the item would touch that state from two threads at once. Off the
  /// loop's thread a block carries them there, released on the loop's next pass (in whatever
  /// mode it runs); once the loop accepts no more blocks (its thread is exiting), here.
  func releaseOnOwnThread<Closures>(_ closures: consuming Closures) {
    guard !isCurrent else { return }  // released as the caller's last use ends
    let carried = closures
    try? enqueue(QueuedBlock(modes: .any) { withExtendedLifetime(carried) {} })
  }
}
