/// The wait phase of a `VirtualLoop`'s loop: where a loop of a thread sleeps in the kernel,
/// this one looks at its descriptors without waiting and, when nothing is ready, moves its
/// clock to the moment the sleep would have ended: the mode's next timer (its tolerance
/// window included, as the timerfd would be armed) or the run's deadline, whichever is first.
/// Everything around it — the phases before and after, the timer and descriptor handling,
/// the wake-up accounting and the trace — is the loop's own code.
extension Loop {
  func waitVirtually(
    in mode: ModeState, until deadline: LoopClock.Instant?, poll asked: Bool,
    on clock: VirtualClock
  ) -> WakeResult {
    let (epoll, _) = prepareToWait(in: mode)
    // A wake-up asked for while the pass was busy (a posted block) is answered by not
    // sleeping, as `commitToWait` answers it.
    let poll = lock.withLock { () -> Bool in
      if posted.hasWaiting || !blocks.isEmpty { return true }
      guard wakeAskedForLocked else { return asked }
      clearWakeRequestLocked()
      return true
    }
    // Descriptors first: one ready now ends the sleep before any time passes.
    var found: Int?
    while found == nil {  // nil: a signal interrupted the look; look again
      do {
        found = try epoll.wait(timeoutNanoseconds: 0)
      } catch {
        preconditionFailure("polling the epoll set of mode \(mode.mode) failed: \(error)")
      }
    }
    let count = found ?? 0
    var slept: (start: LoopClock.Instant, end: LoopClock.Instant)?
    if !poll {
      let start = clock.now
      if count == 0 { clock.move(to: virtualSleepEnd(in: mode, until: deadline, on: clock)) }
      slept = (start, clock.now)
    }
    let sink = traceSink(mode.mode)
    var result = WakeResult()
    var wokenBy: [LoopTracer.WakeCause] = []
    lock.withLock {
      waitGeneration &+= 1
      result.waitCount = waitGeneration
      var causes = WakeCauses()
      if let armed = mode.armedDeadline, armed <= clock.now {
        result.timerExpired = true
        if slept != nil {
          causes.timer = 1
          if sink != nil { wokenBy.append(.timer) }
        }
      }
      for index in 0..<count {
        let cause = classifyLocked(
          epoll.event(index), in: mode, into: &result, counting: &causes, naming: sink != nil)
        if let cause, slept != nil { wokenBy.append(cause) }
      }
      if let slept { countWakeLocked(causes, slept: slept) }
      result.shedDue = mode.descriptorPhaseDue
    }
    if let sink, let slept {
      sink.record(
        .slept(wokenBy: wokenBy.isEmpty ? [.deadline] : wokenBy), from: slept.start,
        to: slept.end)
    }
    return result
  }

  /// Where a sleep with nothing ready would end: the mode's timer deadline or the run's,
  /// whichever is first. Traps when that lies past what the clock may reach on its own (or
  /// there is none): the clock moves only when told, and waiting in real time instead would
  /// hang the test with no word of why.
  private func virtualSleepEnd(
    in mode: ModeState, until deadline: LoopClock.Instant?, on clock: VirtualClock
  ) -> LoopClock.Instant {
    let armed = lock.withLock { mode.armedDeadline }
    let end = [armed, deadline].compactMap { $0 }.min()
    guard let end else {
      fatalError(
        "RunLoopKit: a run of mode \"\(mode.mode)\" on a VirtualLoop has nothing to wait for "
          + "in virtual time (no timer in the mode, no deadline for the run) and would sleep "
          + "for ever; a virtual loop never waits in real time. Give the run a deadline, stop "
          + "it from a callout, or post the work it waits for before it runs.")
    }
    let horizon = clock.horizon
    guard end <= horizon else {
      let prefix =
        "RunLoopKit: a run of mode \"\(mode.mode)\" on a VirtualLoop would sleep until "
        + "\(Loop.virtualOffset(end, clock)), but its clock may only reach "
        + "\(Loop.virtualOffset(horizon, clock)) now"
      if clock.autoAdvance.load(ordering: .relaxed) {
        // Only the limit of a call in progress stops an auto-advancing clock.
        fatalError(
          prefix + ", the limit of the VirtualLoop call in progress (advance, step, "
            + "runUntilIdle or runUntil), which promised where the clock is when it returns; "
            + "auto-advance moves the clock only up to that limit. Advance far enough "
            + "(advance(by:) or advance(to:)), or run the loop outside those calls.")
      }
      fatalError(
        prefix + ": a virtual clock moves only when told. "
          + "Drive the loop with advance(by:) or advance(to:) far enough, or make it with "
          + "VirtualLoop(autoAdvance: true) so that runs move the clock themselves.")
    }
    return end
  }

  /// "t+1.5s" from the virtual clock's start, for messages.
  static func virtualOffset(_ instant: LoopClock.Instant, _ clock: VirtualClock) -> String {
    "t+\(clock.start.duration(to: instant))"
  }
}
