/// The end of a loop (its thread's exit), and the descriptors it owns until then. CF's
/// counterpart is `__CFFinalizeRunLoop`, which removes the sources of a dying thread's loop;
/// this one first runs the work the loop accepted (CF frees a dying loop's blocks unrun),
/// then invalidates every item bound to the loop and refuses later posts.
extension Loop {
  /// Called on the owning thread as it exits: cancels manual sources, unregisters descriptors,
  /// drops timers and observers, closes every descriptor the loop opened, and invalidates
  /// every item bound to it — in a mode, in `.common`, or in none (removed but kept) — so each
  /// refuses from now on and releases its closures. The blocks and executor jobs the loop
  /// accepted have run by then (`runAcceptedWorkBeforeExit`, which also made `perform`
  /// throw from then on), so no block is lost without its poster knowing.
  func tearDown() {
    for watch in calloutBoard.close() { watch.loopEnded() }
    let (callouts, items, retired) = lock.withLock { () -> ([Callout], [any LoopItem], [Any]) in
      tornDown = true
      posted.refuse(.closed)
      // Closed and emptied already by `runAcceptedWorkBeforeExit`, which closes only an empty
      // queue: this takes nothing, unless a caller skipped that drain.
      posted.take(appendingTo: &blocks, before: posted.claimed)
      // Everything the loop lets go of leaves this locked section in `items` and `retired`
      // and is released only after the lock is: an item's closure may hold the last
      // reference to an object whose deinit calls back into this loop, and the lock is not
      // recursive (GLib's /maincontext/source_finalization_from_source).
      var items: [any LoopItem] = []
      var callouts: [Callout] = []
      for mode in modeStates.values {
        let timers =
          mode.timers.entries.map(\.timer)
          + firingTimers.filter { $0.slots.contains { $0.mode === mode } }
        let descriptors = mode.descriptors.entries.sorted { $0.key < $1.key }.map(\.value)
        let modeItems: [any LoopItem] =
          mode.manualSources.inOrder + descriptors + timers + mode.observers
        items += modeItems  // before detaching: this keeps each of them alive past the lock
        for item in modeItems {
          if let callout = item.detachLocked(from: mode, of: self) { callouts.append(callout) }
        }
        mode.close()
      }
      items += commonItems.removeAll()
      items += unscheduledItems.removeAll()
      // The drain's spare buffer goes too (room for up to `drainBufferLimit` blocks): an item
      // kept after teardown keeps this loop object alive.
      // Sources signalled since the last pass: invalidated below, never to be performed.
      signalInbox.take(swapping: &inboxBuffer)
      let retired: [Any] = [
        inboxBuffer,
        Array(modeStates.values), blocks, deferredBlocks, spareBatch as Any, firingTimers,
        executorStorage as Any, jobs.executor as Any, spareEpoll as Any, witnesses as Any,
      ]
      witnesses?.close()
      witnesses = nil
      spareBatch = nil
      executorStorage = nil
      jobs.executor = nil
      spareEpoll = nil
      modeStates = [:]
      lastModeFound = nil
      blocks = []
      deferredBlocks = []
      firingTimers = []
      inboxBuffer = []
      return (callouts, items, retired)
    }
    // No new eventfd write can be reserved now (tornDown is set); close() lets those already
    // reserved finish.
    wakeFD?.close()
    for callout in callouts { callout() }
    // Nothing can run these items again: invalidating them releases what their closures hold,
    // and ports learn that nobody will read them any more, so later sends throw.
    let thread = threadDescription
    for item in items { item.invalidate(becauseLoopOf: thread) }
    withExtendedLifetime(retired) {}
  }

  /// What the loop uses `fd` for, if it is one of its own descriptors.
  func roleOfOwnDescriptorLocked(_ fd: Int32) -> String? {
    if let wakeFD, fd == wakeFD.fd { return "its wake-up eventfd" }
    if let spareEpoll, fd == spareEpoll.fd { return "its spare epoll set" }
    if let witnesses, fd == witnesses.set.fd { return "its epoll set of descriptor witnesses" }
    for mode in modeStates.values {
      if fd == mode.epoll.fd { return "the epoll set of mode \"\(mode.mode)\"" }
      if fd == mode.timerFD.fd { return "the timerfd of mode \"\(mode.mode)\"" }
      if let outer = mode.embeddingSet, fd == outer.fd {
        return "the descriptor of the embedding of mode \"\(mode.mode)\""
      }
    }
    return nil
  }

  /// Throws if `fd` is one of the loop's own descriptors: a user's fd closed and its number
  /// handed to a new mode's epoll set, say. Watching it would wake the loop for its own events.
  func checkNotOwnDescriptorLocked(_ fd: Int32) throws(LoopError) {
    guard let role = roleOfOwnDescriptorLocked(fd) else { return }
    throw .invalidArgument(
      name: "descriptor", value: "fd \(fd)",
      reason: "it belongs to the loop itself (\(role)); watch a descriptor you opened")
  }

  /// Steps taken by the loop's common-item set, for tests that check how adding scales.
  var itemSteps: Int { commonItems.steps }

  /// The loop's own descriptors (wake-up eventfd, spare epoll set, witness set, and each
  /// mode's epoll fd and timerfd), for tests that check teardown closes them.
  var ownedDescriptors: [Int32] {
    lock.withLock {
      [wakeFD?.fd, spareEpoll?.fd, witnesses?.set.fd].compactMap { $0 }
        + modeStates.values.flatMap { [$0.epoll.fd, $0.timerFD.fd] }
    }
  }
}
