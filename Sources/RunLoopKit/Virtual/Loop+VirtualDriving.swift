/// What `VirtualLoop`'s calls ask of the loop beyond a run.
extension Loop {
  /// Blocks run, sources handled and timers fired so far: what `runUntilIdle` watches.
  var workDone: UInt64 {
    lock.withLock { counters.blocksRun &+ counters.sourcesHandled &+ counters.timersFired }
  }

  func hasBlocks(for mode: Mode) -> Bool { lock.withLock { hasBlocksLocked(for: mode) } }

  /// Blocks in real time, in the mode's epoll set, until another thread brings something —
  /// a block or job (the wake-up eventfd), a port message, a ready descriptor — or until
  /// `deadline`. The mode's timer is never armed on a virtual loop, so time alone ends it only
  /// at the deadline. Posters see `asleep` and write the eventfd, as for a real sleep.
  func waitForOutsideWork(in name: Mode, until deadline: LoopClock.Instant) {
    guard let mode = lock.withLock({ try? modeLocked(name) }) else { return }
    // Drains a wake-up written for an earlier wait, and forgets that one was sent.
    let (epoll, _) = prepareToWait(in: mode)
    let waits = lock.withLock { () -> Bool in
      // A nested run's return asks the outer run to look again; that is not outside work.
      if wakeRequested && frames.isEmpty { return false }
      wakeRequested = false
      // Said before the last look at the posted blocks, as `commitToWait` does.
      sleeping = true
      asleep.store(true, ordering: .sequentiallyConsistent)
      guard hasBlocksLocked(for: name) else { return true }
      sleeping = false
      asleep.store(false, ordering: .relaxed)
      return false
    }
    guard waits else { return }
    let timeout = max(0, LoopClock.Instant.now.duration(to: deadline).saturatedNanoseconds)
    _ = try? epoll.wait(timeoutNanoseconds: timeout)
    lock.withLock {
      sleeping = false
      asleep.store(false, ordering: .relaxed)
      // What the wait read stays in the kernel (level-triggered) for the next pass to find;
      // the eventfd is drained before the next wait.
      wakeFDReadable = true
    }
  }

  /// The deadline the mode's timer would be armed at (its first timer, tolerance included).
  func virtualWakeDeadline(in mode: Mode) -> LoopClock.Instant? {
    lock.withLock { modes[mode]?.armedDeadline }
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
