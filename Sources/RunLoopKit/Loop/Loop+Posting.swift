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

  /// `ResidentThread.perform`: refused once the thread was stopped, by the same atomic step
  /// that queues the block, so a post lands either before the stop block (and runs) or
  /// throws `stopped`, never neither.
  func enqueueFromResident(
    stopped: @autoclosure () -> LoopError, _ queued: consuming QueuedBlock
  ) throws(LoopError) {
    if posted.push(consume queued, refusing: [.closed, .residentStopped]) != nil {
      throw stopped()
    }
    wakeIfAsleep()
  }

  /// Queues `queued` and wakes the loop, unless the loop's thread has exited (or is taking
  /// its last blocks).
  func enqueue(_ queued: consuming QueuedBlock) throws(LoopError) {
    if posted.push(consume queued, refusing: .closed) != nil {
      throw .loopTornDown(thread: threadDescription)
    }
    wakeIfAsleep()
  }

  /// After a post: a loop that said it sleeps is woken. A busy loop is not told at all: it
  /// looks at the queue before it sleeps (`commitToWait`).
  @inline(__always)
  private func wakeIfAsleep() {
    guard asleep.load(ordering: .sequentiallyConsistent) else { return }
    lock.lock()
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

  /// A wake-up (from a post that found the loop asleep, `wakeUp()`, a source or timer added
  /// from another thread) is sent only when the loop sleeps and none is pending yet; a busy
  /// loop is told with a flag instead, which its next wait checks. (Posts to a busy loop do
  /// not even set the flag: the wait looks at the post queue itself.) So a burst of posts
  /// to a busy loop costs no syscalls, and one to a sleeping loop costs exactly one: an
  /// eventfd write when the loop sleeps in `epoll_wait`, a futex wake on its futex.
  ///
  /// Returns what the caller must pass to `send(_:)` once it has released the lock. The
  /// syscall happens outside the lock because the loop it wakes takes that lock first thing:
  /// waking it while holding the lock would make the woken thread block on the lock straight
  /// away and be woken a second time (measured: several microseconds per wake).
  /// Answers the wake-up asked for, if any (see `wakeUp` for the ordering).
  @inline(__always)
  func clearWakeRequestLocked() {
    wakeRequested = false
    if wakePending.load(ordering: .relaxed) {
      _ = wakePending.exchange(false, ordering: .sequentiallyConsistent)
    }
    if wakeAsked.load(ordering: .relaxed) {
      _ = wakeAsked.exchange(false, ordering: .sequentiallyConsistent)
    }
  }

  /// Whether a wake-up was asked for and not answered yet, with the lock (`wakeRequested`) or
  /// without it (`wakeAsked`). A request this misses was asked for after the caller said its
  /// sleep (`asleep`), and so took the lock and wakes that sleep; see `wakeUp`.
  @inline(__always)
  var wakeAskedForLocked: Bool {
    wakeRequested || wakeAsked.load(ordering: .relaxed)
  }

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
    // Until the woken wait is sorted out (`sortOutWake` clears it), later wake-ups need not
    // take the lock to find this one sent (see `wakeUp`). Not for a loop whose wake may be
    // answered without a pass that clears it: an embedding between its host's passes, a
    // virtual loop's wait.
    if embeddedMode == nil && virtualClock == nil {
      wakePending.store(true, ordering: .releasing)
    }
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
    guard signal != .none, tracing.load(ordering: .relaxed) else { return deliver(signal) }
    sendTraced(signal)
  }

  /// `send(_:)` for the rare callers that wake the loop while still holding its lock.
  func sendHoldingLock(_ signal: WakeSignal) {
    guard signal != .none, tracing.load(ordering: .relaxed) else { return deliver(signal) }
    sendTracedHoldingLock(signal)
  }

  /// The syscall of `send(_:)`: a futex wake or an eventfd write.
  func deliver(_ signal: WakeSignal) {
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

  /// A resident thread's stop: queues its stop block (in any mode) and, by the same atomic
  /// step, refuses the thread's later posts (`enqueueFromResident`).
  func queueResidentStop(_ block: @escaping () -> Void) {
    let stop = QueuedBlock(modes: .any, block: block)
    if posted.push(consume stop, refusing: .closed, setting: .residentStopped) != nil {
      posted.refuse(.residentStopped)
    }
    wakeIfAsleep()
  }

  /// For a thread about to exit: hands back the blocks still queued so it can run them itself
  /// instead of letting teardown discard them, or, when none are left and `mayClose`, refuses
  /// every later `perform`. Call it until it returns nothing: blocks run from one batch may
  /// post more. (`runAcceptedWorkBeforeExit` does.)
  func takeQueuedBlocksOrClose(mayClose: Bool = true) -> [QueuedBlock] {
    var held: [QueuedBlock] = []
    swap(&held, &jobs.held)  // only if the thread exits from inside a job, which is rare
    while true {
      posted.waitForWrites(before: posted.claimed)
      let taken = lock.withLock { () -> [QueuedBlock]? in
        posted.take(appendingTo: &blocks, before: posted.claimed)
        if held.isEmpty && blocks.isEmpty && deferredBlocks.isEmpty {
          guard mayClose else { return [] }
          // Nil when a post claimed its slot since: it was accepted, so it runs first.
          return posted.closeIfEmpty() ? [] : nil
        }
        defer {
          blocks = []
          deferredBlocks = []
        }
        return held + deferredBlocks + blocks
      }
      if let taken { return taken }
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
  /// The closures are moved, never copied, from the caller into the block (callers pass them
  /// with `consume`): a copy kept anywhere on this thread (an unoptimised build keeps locals
  /// until their scope ends) could be the last reference, let go here after the loop ran the
  /// block.
  func releaseOnOwnThread<Closures>(_ closures: consuming Closures) {
    guard !isCurrent else { return }  // released as the caller's last use ends
    try? enqueue(
      QueuedBlock(modes: .any) { [carried = consume closures] in
        withExtendedLifetime(carried) {}
      })
  }
}
