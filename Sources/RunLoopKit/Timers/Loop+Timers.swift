import CRunLoopShims

/// The timer phase of a pass (`fireTimers`) and the timerfd bookkeeping behind it. Same lock
/// discipline as every phase: candidates are chosen under the loop's lock, and each is checked
/// again, under it, right before its callout.
extension Loop {
  /// A mode's timers changed. Re-arming its timerfd is a syscall, and an expensive one in a VM
  /// (it reprograms the hardware timer), so on the loop's own thread it is deferred to the
  /// loop's next wait on that mode — firing a batch of a thousand timers then costs one
  /// re-arm, not a thousand. Another thread cannot know when the loop will next look, so
  /// changes from there re-arm at once: a sleeping loop must wake for a new earlier timer.
  ///
  /// Inlined, with the re-arming out of line: every add and cancel on the loop's own thread
  /// comes here only to set a flag.
  @inline(__always)
  func timersChangedLocked(in mode: ModeState) {
    // A virtual loop arms no timerfd: re-arming only notes the deadline, at once. Nor can
    // an embedded mode between its host's passes wait for its next wait: there is none.
    if virtualClock == nil, pthread_equal(pthread_self(), thread) != 0,
      !(embeddedMode === mode && frames.isEmpty)
    {
      mode.timerNeedsArming = true
    } else {
      rearmTimersLocked(in: mode)
    }
  }

  /// `timersChangedLocked` off the loop's thread, on a virtual loop, or for an embedded mode
  /// between its host's passes: re-arms now.
  @inline(never)
  private func rearmTimersLocked(in mode: ModeState) {
    mode.noteTimerDate()
    if timerFDNeededLocked(mode) { mode.syncTimerFD(arming: true) }
    // A loop asleep on its futex sleeps until the deadline it read when it fell asleep; a
    // disarmed timer (no timer left) never needs it to wake earlier.
    if let armed = mode.armedDeadline { wakeFutexSleeperLocked(in: mode, forDeadline: armed) }
    // A virtual loop waiting in `runUntil` arms nothing that time could end: a timer another
    // thread made due now wakes it, to fire (one due later waits for the clock to move).
    if outsideWorkMode == mode.mode, mode.hasTimerDue(at: now) {
      wakeIfWaitingLocked(in: mode.mode)
    }
  }

  /// Fires every timer of this mode whose fire date has come, earliest first. As in CF, the
  /// due timers are only candidates, each checked again right before its own callout: an
  /// earlier handler may have invalidated or postponed it, or a nested run fired it already.
  /// Unlike CF, which checks only that a timer is still valid, this also skips one an earlier
  /// handler removed from the mode (a deliberate difference, listed in the README).
  func fireTimers(in mode: ModeState) {
    let now = self.now
    // The list the last timer phase emptied, taken (a nested run in a handler finds none
    // and starts its own), so a phase allocates no array.
    var candidates = lock.withLock { () -> [LoopTimer] in
      // Only a timerfd armed at a date now past can have expired: no `read` otherwise.
      if virtualClock == nil, let armed = mode.timerFD.armedDeadline, armed <= now {
        _ = try? mode.timerFD.acknowledge()
      }
      var list: [LoopTimer] = []
      swap(&list, &spareDueTimers)
      mode.timers.appendDue(at: now, to: &list)
      return list
    }
    let sink = candidates.isEmpty ? nil : traceSink(mode.mode)
    let watched = !candidates.isEmpty && watchingStalls()
    for timer in candidates {
      // Locked by hand: a handler returned through the generic `withLock` is re-wrapped in a
      // thunk, an allocation per callout.
      lock.lock()
      let begun = beginFiringLocked(timer, in: mode, now: now)
      lock.unlock()
      guard let (firedAt, handler) = begun else { continue }
      TestPausePoint.reach(.timerAboutToFire, by: timer)
      let began = sink?.now
      if watched {
        calloutBoard.begin(.timer, label: timer.label, mode: mode.mode, depth: frames.count)
      }
      handler(timer)
      if watched { calloutBoard.end() }
      if let sink, let began {
        sink.record(
          .timer(timer.traceName, lateness: firedAt.duration(to: began)), since: began)
      }
      if !timer.repeats { timer.invalidate() }
      lock.withLock { finishFiringLocked(timer, firedAt: firedAt) }
    }
    // Emptied before the lock: letting go of a timer may run its handler's deinit, which
    // may post to this loop.
    candidates.removeAll(keepingCapacity: true)
    lock.withLock {
      timersChangedLocked(in: mode)
      if spareDueTimers.capacity == 0 { swap(&candidates, &spareDueTimers) }
    }
  }

  /// Takes a due timer out of every heap for the length of its callout, so a nested run in
  /// any mode neither fires it again nor keeps re-arming a timerfd for a date already past.
  /// Returns the fire date being served and the handler to call, or nil if the timer should
  /// not fire now.
  private func beginFiringLocked(
    _ timer: LoopTimer, in mode: ModeState, now: LoopClock.Instant
  ) -> (LoopClock.Instant, LoopTimer.Handler)? {
    guard !timer.isFiring, timer.slots.contains(where: { $0.mode === mode && $0.index != nil })
    else { return nil }
    guard let (fireDate, handler) = timer.dueHandler(at: now) else { return nil }
    timer.isFiring = true
    firingTimers.append(timer)
    counters.timersFired += 1
    for slot in timer.slots where slot.index != nil {
      slot.heap.detach(timer)
      timersChangedLocked(in: slot.mode)
    }
    return (fireDate, handler)
  }

  /// Puts a repeating timer back on its grid (or where its handler moved it) in every mode
  /// it is in now, including modes it joined during its own callout. A timer that is invalid
  /// by now leaves every mode here instead (see `retireTimerLocked`).
  private func finishFiringLocked(_ timer: LoopTimer, firedAt: LoopClock.Instant) {
    timer.isFiring = false
    firingTimers.removeAll { $0 === timer }
    guard timer.repeats, timer.isValid else {
      retireTimerLocked(timer)
      return
    }
    let (date, tolerance) = timer.binding.lock.withLock { () -> (LoopClock.Instant, Int64) in
      let current = timer.scheduleUnlocked
      // A repeating timer's interval is never nil (`LoopTimer.interval`).
      let next = LoopTimer.nextFireDate(
        after: firedAt, current: current.fireDate, interval: timer.storedInterval ?? .zero,
        now: now, wasSet: current.wasSet)
      timer.setFireDateUnlocked(next)
      return (next, current.tolerance)
    }
    for slot in timer.slots {
      if slot.index == nil {
        slot.heap.reattach(timer, fireDate: date, tolerance: tolerance)
      } else {
        slot.heap.update(timer, fireDate: date, tolerance: tolerance)
      }
      timersChangedLocked(in: slot.mode)
    }
  }
}
