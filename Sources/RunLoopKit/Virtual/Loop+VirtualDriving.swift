/// What `VirtualLoop`'s calls ask of the loop beyond a run.
extension Loop {
  /// Blocks run, sources handled and timers fired so far: what `runUntilIdle` watches.
  var workDone: UInt64 {
    lock.withLock { counters.blocksRun &+ counters.sourcesHandled &+ counters.timersFired }
  }

  func hasBlocks(for mode: Mode) -> Bool { lock.withLock { hasBlocksLocked(for: mode) } }

  /// A task resumption is leaving this loop's thread for Swift's global executor and will
  /// come back as a job of the loop's executor (`Task.sleep` on a loop timer, in
  /// RunLoopKitExecutors): on a virtual loop, `runTask` holds the clock until it is back.
  package func noteResumptionLeavingThread() { virtualClock?.resumptionLeft() }

  /// Blocks in real time, in the mode's epoll set, until another thread brings something —
  /// a block or job (the wake-up eventfd), a port message, a ready descriptor, a signalled
  /// source that joins the mode or is woken, a timer added or moved to a date already due —
  /// or until `deadline`. The mode's timer is never armed on a virtual loop, so time alone
  /// ends it only at the deadline. Posters see `asleep` and write the eventfd, as for a real
  /// sleep; `outsideWorkMode` tells the rest (`wakeIfWaitingLocked`). Returns false when the
  /// wait ran to `deadline` with nothing found, true otherwise (work was waiting already, or
  /// something came).
  func waitForOutsideWork(in name: Mode, until deadline: LoopClock.Instant) -> Bool {
    guard let mode = lock.withLock({ try? modeLocked(name) }) else {
      // The mode cannot be made (the process is out of descriptors, or the loop is torn
      // down): nothing can come to it, and looking again at once would spin.
      let left = LoopClock.Instant.now.duration(to: deadline)
      if left > .zero { try? Syscall.sleep(for: left) }
      return false
    }
    // Drains a wake-up written for an earlier wait, and forgets that one was sent.
    let (epoll, _) = prepareToWait(in: mode)
    let waits = lock.withLock { () -> Bool in
      // A wake-up asked for since the last pass (`wakeUp()`, a source signalled into the
      // mode) is answered by a look, once: left set, it would answer every later wait too,
      // and the caller would spin. A nested run's return asks the outer run to look again,
      // which is not work from outside: inside a run it is only forgotten.
      if wakeAskedForLocked {
        clearWakeRequestLocked()
        if frames.isEmpty { return false }
      }
      // Work another thread made runnable since the last pass, while no wait was there to
      // wake (between two of the caller's looks): a timer made due, a source that joined
      // the mode signalled. The caller runs a pass for it instead.
      if mode.hasTimerDue(at: now) || hasUnseenSignalsLocked(in: mode) { return false }
      // Said before the last look at the posted blocks and at a wake-up asked for without
      // the lock, as `commitToWait` does.
      sleeping = true
      outsideWorkMode = name
      asleep.store(true, ordering: .sequentiallyConsistent)
      let asked = wakeAsked.exchange(false, ordering: .sequentiallyConsistent) && frames.isEmpty
      guard asked || hasBlocksLocked(for: name) else { return true }
      sleeping = false
      outsideWorkMode = nil
      asleep.store(false, ordering: .relaxed)
      return false
    }
    guard waits else { return true }
    // Asleep in real time, inside a callout maybe (`runUntil` in a block): not a stall.
    let published = calloutBoard.waitBeginsIfPublished()
    defer { if published { calloutBoard.waitEnds() } }
    let timeout = max(0, LoopClock.Instant.now.duration(to: deadline).saturatedNanoseconds)
    let found = (try? epoll.wait(timeoutNanoseconds: timeout)) ?? 1
    lock.withLock {
      sleeping = false
      outsideWorkMode = nil
      asleep.store(false, ordering: .relaxed)
      // What the wait read stays in the kernel (level-triggered) for the next pass to find;
      // the eventfd is drained before the next wait.
      wakeFDReadable = true
    }
    return found > 0
  }

  /// The deadline the mode's timer would be armed at (its first timer, tolerance included).
  func virtualWakeDeadline(in mode: Mode) -> LoopClock.Instant? {
    lock.withLock { modeStates[mode]?.armedDeadline }
  }

  /// The tracer a step reads its events from: the loop's own, or one attached for the step
  /// (true when the caller must detach it).
  func tracerForStep() -> (LoopTracer, Bool) {
    if let attached = lock.withLock({ self.tracer }) { return (attached, false) }
    let tracer = LoopTracer(capacity: 4096)
    do {
      try tracer.attach(to: self)
    } catch {
      preconditionFailure("attaching a tracer to a virtual loop for step() failed: \(error)")
    }
    return (tracer, true)
  }
}

extension Loop {
  /// Traps for a mode no run can run: `.common` (a set of modes, never run itself, as in CF)
  /// or an empty name. A run of it would return `.finished` at once and the call would do
  /// nothing, or, until idle, wait for ever on blocks queued for the set.
  static func requireRunnable(_ mode: Mode, for call: String) {
    if mode == .common || mode.name.isEmpty {
      fatalError(
        "RunLoopKit: \(call)(in: \(mode == .common ? ".common" : "\"\"")) names no mode a run "
          + "can run: .common is the set of common modes and is never run itself, as in CF. "
          + "Pass .default or another mode by name.")
    }
  }
}

extension Loop {
  /// Whether the loop's thread is inside a job now (an executor job, a main-queue drain).
  /// The loop's thread only.
  var isRunningJob: Bool { jobs.depth > 0 }

  /// Whether `mode` is one of the loop's common modes.
  func isCommonMode(_ mode: Mode) -> Bool { lock.withLock { commonModeNames.contains(mode) } }
}

extension Loop {
  /// Whether a pass of `mode` now would have work at hand: blocks (jobs included) or manual
  /// sources signalled since the mode last looked.
  func hasReadyWork(in mode: Mode) -> Bool {
    lock.withLock {
      if hasBlocksLocked(for: mode) { return true }
      guard let state = modeStates[mode] else { return false }
      return hasUnseenSignalsLocked(in: state)
    }
  }
}
