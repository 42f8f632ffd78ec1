/// What ended a wait, sorted out: the timer, descriptors and the wake-up port, the wake
/// counted by cause in the metrics, and the spin and sleep recorded for a tracer. The other
/// half of the wait phase (`Loop+Wait.swift`), run under the loop's lock right after the
/// kernel returns.
extension Loop {
  /// Sorts what the wait returned into timer, descriptors and wake-up, and counts the wake.
  /// Returns the phase's result and, when `naming`, what woke the loop (for a tracer).
  func sortOutWake(
    spin: SpinOutcome, wait: KernelWait, from epoll: Epoll, in mode: ModeState, naming: Bool
  ) -> (WakeResult, [LoopTracer.WakeCause]) {
    // Read before the lock: the locked closure would capture (copy) the whole outcome.
    let found = spin.found
    lock.lock()
    let sorted = sortOutWakeLocked(found: found, wait: wait, from: epoll, in: mode, naming: naming)
    lock.unlock()
    return sorted
  }

  /// `sortOutWake` under the loop's lock; `found` is what a spin found instead of a wait.
  @inline(__always)
  func sortOutWakeLocked(
    found: [Epoll.Event]?, wait: KernelWait, from epoll: Epoll, in mode: ModeState, naming: Bool
  ) -> (WakeResult, [LoopTracer.WakeCause]) {
    var result = WakeResult()
    var wokenBy: [LoopTracer.WakeCause] = []
    do {
      sleeping = false
      // A wake-up sent to this wait is answered now; one asked for since (`wakeRequested`,
      // `wakeAsked`) still waits for the next pass. Sequentially consistent: see `wakeUp`.
      if !wakeRequested && wakePending.load(ordering: .relaxed) {
        _ = wakePending.exchange(false, ordering: .sequentiallyConsistent)
      }
      asleep.store(false, ordering: .relaxed)
      sleepStart = nil
      sleepingOnFutex = false
      futexSleepMode = nil
      futexSleepUntil = nil
      epollSleepMode = nil
      epollSleepTimerDate = nil
      result.wakeAskedAt = wakeAskedAt
      wakeAskedAt = nil
      waitGeneration &+= 1
      result.waitCount = waitGeneration
      var causes = WakeCauses()
      if let seen = wait.futexSeen, let slept = wait.slept {
        if futex.value != seen {
          causes.wakeUp = 1
          if naming { wokenBy.append(.wakeUp) }
        }
        if let armed = mode.armedDeadline, armed <= slept.end {
          result.timerExpired = true
          causes.timer = 1
          if naming { wokenBy.append(.timer) }
        }
      }
      if wait.timerDue { result.timerExpired = true }
      if let found {
        for event in found {
          let cause = classifyLocked(
            event, in: mode, into: &result, counting: &causes, naming: naming)
          if let cause { wokenBy.append(cause) }
        }
      } else {
        for index in 0..<wait.count {
          let cause = classifyLocked(
            epoll.event(index), in: mode, into: &result, counting: &causes, naming: naming)
          if let cause { wokenBy.append(cause) }
        }
      }
      // A sleep whose timeout carried the timers' date has no timerfd event to show for it:
      // the clock says whether the date came. (One another thread moved later since came
      // not: that wake is the timeout's, and the timer phase has nothing to fire.)
      if wait.timerDateInTimeout != nil, !result.timerExpired, let slept = wait.slept,
        let date = mode.armedDeadline, date <= slept.end
      {
        result.timerExpired = true
        causes.timer = 1
        if naming { wokenBy.append(.timer) }
      }
      if let slept = wait.slept { countWakeLocked(causes, slept: slept) }
      result.shedDue = mode.descriptorPhaseDue
    }
    return (result, wokenBy)
  }

  /// Files one event under the wake-up port, the timer or the descriptors. Returns what
  /// woke the loop only when `naming` (an untraced loop never builds it).
  func classifyLocked(
    _ event: Epoll.Event, in mode: ModeState, into result: inout WakeResult,
    counting causes: inout WakeCauses, naming: Bool
  ) -> LoopTracer.WakeCause? {
    switch event.token {
    case ModeState.wakeToken:
      wakeFDReadable = true
      causes.wakeUp = 1
      return naming ? .wakeUp : nil
    case ModeState.timerToken:
      result.timerExpired = true
      causes.timer = 1
      return naming ? .timer : nil
    default:
      // The buffer the last descriptor phase emptied (see `handleDescriptors`), taken only
      // when there is a descriptor event to hand over.
      if result.ready.capacity == 0 { swap(&result.ready, &readyBuffer) }
      result.ready.append(event)
      // Read in place: the wake path takes no reference to the source here.
      let kind = mode.descriptors.withSource(event.token) { ($0.isMainQueue, $0.isPort) }
      if kind?.0 == true {
        causes.mainQueue = 1
      } else if kind?.1 == true {
        causes.port = 1
      } else {
        causes.descriptor = 1
      }
      guard naming else { return nil }
      return mode.descriptors.withSource(event.token) { $0.wakeCause } ?? .unregisteredDescriptor
    }
  }

  /// Adds one blocking wait to the metrics: time asleep, and what ended it.
  func countWakeLocked(
    _ causes: WakeCauses, slept: (start: LoopClock.Instant, end: LoopClock.Instant)
  ) {
    var causes = causes
    let end = max(slept.end, asleepReportedUntil ?? slept.end)
    asleepReportedUntil = nil
    counters.timeAsleep += slept.start.duration(to: end)
    if causes == WakeCauses() { causes.timeout = 1 }
    counters.wakes.port += causes.port
    counters.wakes.mainQueue += causes.mainQueue
    counters.wakes.descriptor += causes.descriptor
    counters.wakes.timer += causes.timer
    counters.wakes.wakeUp += causes.wakeUp
    counters.wakes.timeout += causes.timeout
  }

  /// Records the spin and the sleep of this wait, with what ended them.
  func trace(
    _ spin: SpinOutcome, _ wait: KernelWait, _ wokenBy: [LoopTracer.WakeCause],
    to sink: TraceSink
  ) {
    if let interval = spin.interval {
      // Found nothing in the window (nil), a posted wake-up (no events), or descriptors.
      let found = spin.found.map { $0.isEmpty ? [.wakeUp] : wokenBy } ?? []
      sink.record(.spun(wokenBy: found), from: interval.start, to: interval.end)
    }
    if let slept = wait.slept {
      sink.record(
        .slept(wokenBy: wokenBy.isEmpty ? [.deadline] : wokenBy), from: slept.start,
        to: slept.end)
    }
  }
}
