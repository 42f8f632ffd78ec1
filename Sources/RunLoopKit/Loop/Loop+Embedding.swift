import CRunLoopShims
import Synchronization

/// The loop's side of `LoopEmbedding`: between the host's passes the embedded mode counts as
/// asleep in its epoll set, so that posts, wake-ups and signals write the wake-up eventfd the
/// set reports, and its timerfd stays armed at the mode's next timer date.
extension Loop {
  /// Makes an embedding of `mode` for a host event loop to drive (see `LoopEmbedding`).
  /// Call it on the loop's thread, where the host will call `runPass()`.
  ///
  /// - Throws: `LoopError.invalidArgument` for `.common`, an empty mode name, a mode already
  ///   embedded (one embedding per loop), or a `VirtualLoop`'s loop (it has no descriptors to
  ///   watch); `LoopError.loopTornDown` after the thread exited; a `SystemError` when the
  ///   process is out of descriptors for the mode's epoll set.
  public func makeEmbedding(in mode: Mode = .default) throws(LoopError) -> LoopEmbedding {
    preconditionIsCurrent("makeEmbedding(in:)")
    guard virtualClock == nil else {
      throw .invalidArgument(
        name: "loop", value: "a VirtualLoop's loop",
        reason: "a virtual loop has no descriptor for a host to watch; drive it with advance")
    }
    guard mode != .common, !mode.name.isEmpty else {
      throw .invalidArgument(
        name: "mode", value: "\(mode)", reason: "an embedding runs one named mode")
    }
    // Loop.main serves the main queue from its first run on; embedded, from now on, so that
    // `DispatchQueue.main.async` makes the descriptor readable before the first pass.
    serveMainQueueIfMainThread()
    let (embedding, signal) = try lock.withLock {
      () throws(LoopError) -> (LoopEmbedding, WakeSignal) in
      if tornDown { throw .loopTornDown(thread: threadDescription) }
      if let embedded = embeddedMode {
        throw .invalidArgument(
          name: "mode", value: "\(mode)",
          reason:
            "the loop already has an embedding (of mode \(embedded.mode)); invalidate it first")
      }
      let state = try modeLocked(mode)
      let outer = try Epoll()
      try outer.add(state.epoll.fd, events: CRL_EPOLLIN, token: 0)
      state.embeddingSet = outer
      embeddedMode = state
      return (LoopEmbedding(loop: self, mode: mode, descriptor: outer.fd), idleLocked(state))
    }
    send(signal)
    return embedding
  }

  /// One pass of the embedded mode, without sleeping; the mode is asleep again afterwards.
  func runEmbeddedPass(of name: Mode) -> RunResult {
    preconditionIsCurrent("LoopEmbedding.runPass()")
    let embedded = lock.withLock { () -> Bool in
      guard embeddedMode?.mode == name else { return false }
      // The wake-up that brought the host here is answered by this pass. Drained here too,
      // not only by the pass's wait: a pass of an empty mode (or one an entry observer
      // stops) never waits, and a readable descriptor left behind would make the host spin.
      drainWakeFDLocked()
      return true
    }
    guard embedded else { return .finished }
    // The deadline has passed already: the pass looks at the kernel without waiting. The run
    // wakes the mode from its sleep between passes and puts it back (`runOwnMode`); a run
    // that never began (an empty mode) leaves it asleep as it was.
    return runMode(name, until: now, returnAfterSourceHandled: false, onePass: true)
  }

  /// Ends the embedding of `name`, if it is the loop's: the mode sleeps as before.
  func endEmbedding(of name: Mode) {
    lock.withLock {
      guard let mode = embeddedMode, mode.mode == name else { return }
      wakeLocked()
      embeddedMode = nil
      mode.syncTimerFD(arming: timerFDNeededLocked(mode))
      mode.embeddingSet?.close()
      mode.embeddingSet = nil
    }
  }

  /// See `LoopEmbedding.nextDeadline`.
  func embeddedDeadline(of name: Mode) -> LoopClock.Instant? {
    lock.withLock {
      guard let mode = embeddedMode, mode.mode == name else { return nil }
      let deadline = mode.timerNeedsArming ? mode.timers.wakeDeadline() : mode.armedDeadline
      // A timer parked at .distantFuture (the re-armed timer of a C library) is no deadline.
      return deadline.flatMap { $0 == .distantFuture ? nil : $0 }
    }
  }

  /// Puts the embedded mode to sleep between passes: armed timerfd, asleep in the mode's epoll
  /// set as far as posters can tell. Work that came during the pass (a post for the mode, a
  /// wake-up, a signal the pass did not see) makes the descriptor readable at once: the
  /// returned signal, sent after the unlock, writes the eventfd. Called after each outermost
  /// run while embedded, so a run made between passes (a modal run, say) leaves it asleep too.
  /// Only work for this mode counts: a block for another mode would make the host spin.
  func idleLocked(_ mode: ModeState) -> WakeSignal {
    // Already asleep between passes: a pass of an empty mode never ran, so nothing changed.
    guard !tornDown, frames.isEmpty, !embeddedIdle.load(ordering: .relaxed) else { return .none }
    mode.prepareTimer(arming: true)
    let requested = wakeAskedForLocked
    clearWakeRequestLocked()
    sleeping = true
    sleepingOnFutex = false
    // Not a sleep of the loop's own: the host does its work meanwhile, and no run is active
    // to count it as running (`timeBusy` would go negative), so it is counted as neither.
    sleepStart = nil
    wakeWritten = false
    // Said before the last looks below, sequentially consistent on both sides: a poster that
    // writes its block after the look finds `asleep` set and wakes the loop (see
    // `PostQueue`), a signaller that counts after the look finds `embeddedIdle` set, and a
    // `wakeUp()` that asks after the look finds `asleep` set and takes the lock.
    asleep.store(true, ordering: .sequentiallyConsistent)
    embeddedIdle.store(true, ordering: .sequentiallyConsistent)
    let pending =
      requested || wakeAsked.exchange(false, ordering: .sequentiallyConsistent)
      || hasUnseenSignalsLocked(in: mode) || hasBlocksLocked(for: mode.mode)
    return pending ? requestWakeLocked() : .none
  }

  /// The outermost run begins (`runOwnMode`): an embedded mode asleep between passes wakes.
  func beginOutermostRunLocked() {
    let start = now
    outermostRunStart = start
    noteClockReading(start)
    wakeLocked()
  }

  /// Ends the sleep between passes (a run begins, or the embedding ends). Only that state:
  /// `sleeping` is also set while the loop is really asleep in a run (a modal run between
  /// passes), which this must leave alone.
  private func wakeLocked() {
    guard embeddedIdle.load(ordering: .relaxed) else { return }
    embeddedIdle.store(false, ordering: .relaxed)
    sleeping = false
    asleep.store(false, ordering: .relaxed)
  }
}
