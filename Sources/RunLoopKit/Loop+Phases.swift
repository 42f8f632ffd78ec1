/// The phases of one pass, each called once from `Loop.iterate`.
///
/// Lock discipline, the same in every phase: decide what to call while holding the loop's
/// lock, release it, then call out. Between collecting and calling, another thread (or an
/// earlier callback) may have removed or invalidated an item, so each item is checked again,
/// under the lock, right before its callback runs.
extension Loop {
  struct WakeResult {
    var timerExpired = false
    var ready: [Epoll.Event] = []
  }

  // MARK: Observers

  func notifyObservers(_ activity: Activity, in mode: ModeState) {
    let observers = lock.withLock { () -> [LoopObserver] in
      guard mode.observedActivities.contains(activity) else { return [] }
      return mode.observers.filter { $0.activities.contains(activity) }
    }
    for observer in observers {
      // CF's rule: an observer is never told again while its own callback is still running.
      let callNow = lock.withLock { () -> Bool in
        guard observer.isValid, !observer.isFiring, observer.modes.contains(where: { $0 === mode })
        else { return false }
        observer.isFiring = true
        return true
      }
      guard callNow else { continue }
      observer.handler(observer, activity)
      lock.withLock { observer.isFiring = false }
      if !observer.repeats { observer.invalidate() }
    }
  }

  // MARK: Blocks

  /// Runs every queued block that applies to this mode, in queue order. Blocks queued while
  /// these run wait for the next drain, so a block that queues a block cannot recurse.
  func performBlocks(in mode: ModeState) {
    let runnable = lock.withLock { () -> [QueuedBlock] in
      guard !blocks.isEmpty else { return [] }
      var run: [QueuedBlock] = []
      var keep: [QueuedBlock] = []
      for block in blocks {
        if appliesLocked(block, to: mode.mode) { run.append(block) } else { keep.append(block) }
      }
      blocks = keep
      return run
    }
    for queued in runnable { queued.block() }
  }

  // MARK: Manual sources

  /// Performs signalled manual sources by order, then by signal time. Returns whether any ran.
  func performManualSources(in mode: ModeState, onlyOne: Bool) -> Bool {
    let candidates = lock.withLock { () -> [ManualSource] in
      var signalled: [(source: ManualSource, sequence: UInt64)] = []
      for source in mode.manualSources {
        let key = source.signalKey
        if key.signalled { signalled.append((source, key.sequence)) }
      }
      return signalled.sorted { ($0.source.order, $0.sequence) < ($1.source.order, $1.sequence) }
        .map(\.source)
    }
    var handled = false
    for source in candidates {
      let performNow = lock.withLock {
        mode.manualSources.contains { $0 === source } && source.consumeSignal()
      }
      guard performNow else { continue }
      source.performCallback()
      handled = true
      if onlyOne { break }
    }
    return handled
  }

  // MARK: Waiting

  /// Sleeps in the mode's epoll set until a descriptor, the mode's timer or the wake-up port
  /// fires, or the deadline passes. With `poll` it only looks, without sleeping.
  func waitForEvents(in mode: ModeState, until deadline: LoopClock.Instant?, poll: Bool)
    -> WakeResult
  {
    var timeout: Int64 = -1
    if poll {
      timeout = 0
    } else if let deadline {
      timeout = max(0, LoopClock.Instant.now.duration(to: deadline).saturatedNanoseconds)
    }
    lock.withLock {
      // Someone asked for a wake while we were busy: answer it by not sleeping.
      if wakeRequested {
        wakeRequested = false
        timeout = 0
      }
      sleeping = timeout != 0
    }
    let events: [Epoll.Event]
    do {
      events = try mode.epoll.wait(timeoutNanoseconds: timeout)
    } catch {
      preconditionFailure("waiting on the epoll set of mode \(mode.mode) failed: \(error)")
    }
    var result = WakeResult()
    lock.withLock {
      sleeping = false
      // The eventfd is written only under this lock with `wakeWritten` set, so draining here
      // keeps "readable exactly when wakeWritten" true and the next wait cannot spin on it.
      if wakeWritten {
        wakeWritten = false
        _ = try? wakeFD.drain()
      }
      for event in events {
        switch event.token {
        case ModeState.wakeToken: continue
        case ModeState.timerToken: result.timerExpired = true
        default: result.ready.append(event)
        }
      }
    }
    return result
  }

  // MARK: Timers

  /// Fires every timer of this mode whose fire date has come, earliest first.
  func fireTimers(in mode: ModeState) {
    let due = lock.withLock { () -> [(timer: LoopTimer, firedAt: LoopClock.Instant)] in
      _ = try? mode.timerFD.acknowledge()
      let now = LoopClock.Instant.now
      var due: [(timer: LoopTimer, firedAt: LoopClock.Instant)] = []
      while let entry = mode.timers.popDue(now: now) {
        // Out of every heap while it fires: a nested run in another mode must neither fire it
        // again nor keep re-arming its timerfd for a date that has already passed.
        entry.timer.isFiring = true
        for slot in entry.timer.slots where slot.index != nil {
          slot.heap.detach(entry.timer)
          slot.mode.rearmTimer()
        }
        due.append((entry.timer, entry.fireDate))
      }
      mode.rearmTimer()
      return due
    }
    for (timer, firedAt) in due {
      if timer.isValid { timer.handler(timer) }
      if timer.interval == nil { timer.invalidate() }
      lock.withLock { rescheduleAfterFiringLocked(timer, firedAt: firedAt) }
    }
  }

  /// Puts a repeating timer back on its grid (or where its handler moved it).
  private func rescheduleAfterFiringLocked(_ timer: LoopTimer, firedAt: LoopClock.Instant) {
    timer.isFiring = false
    guard let interval = timer.interval, timer.isValid else { return }
    let (date, tolerance) = timer.binding.lock.withLock { () -> (LoopClock.Instant, Duration) in
      let current = timer.scheduleUnlocked
      let next = LoopTimer.nextFireDate(
        after: firedAt, current: current.fireDate, interval: interval, now: .now)
      timer.setFireDateUnlocked(next)
      return (next, current.tolerance)
    }
    for slot in timer.slots {
      if slot.index == nil {
        slot.heap.reattach(timer, fireDate: date, tolerance: tolerance)
      } else {
        slot.heap.update(timer, fireDate: date, tolerance: tolerance)
      }
      slot.mode.rearmTimer()
    }
  }

  // MARK: Descriptor sources

  /// Calls the handler of each ready descriptor source, by order. Returns whether any ran.
  func handleDescriptors(_ ready: [Epoll.Event], in mode: ModeState, onlyOne: Bool) -> Bool {
    guard !ready.isEmpty else { return false }
    let sources = lock.withLock { () -> [(DescriptorSource, UInt64, DescriptorSource.Events)] in
      ready.compactMap { event in
        mode.descriptors[event.token].map {
          ($0, event.token, DescriptorSource.events(fromEpoll: event.events))
        }
      }.sorted { $0.0.order < $1.0.order }
    }
    var handled = false
    for (source, token, events) in sources {
      let deliver = lock.withLock { () -> Bool in
        // A handler that ran before this one may have removed it, or the fd may be parked.
        guard source.isValid, mode.descriptors[token] === source else { return false }
        if !events.isDisjoint(with: [.error, .hangUp]) {
          parkLocked(source, token: token, in: mode)
        }
        return true
      }
      guard deliver else { continue }
      source.handler(source, events)
      handled = true
      if onlyOne { break }
    }
    return handled
  }

  /// Takes a hung-up or failed descriptor out of the epoll set so it cannot wake the loop
  /// again and again; `setInterest` puts it back.
  private func parkLocked(_ source: DescriptorSource, token: UInt64, in mode: ModeState) {
    guard let index = source.registrations.firstIndex(where: { $0.token == token }),
      !source.registrations[index].parked
    else { return }
    source.registrations[index].parked = true
    if mode.tokenForDescriptor[source.fileDescriptor] == token {
      mode.epoll.remove(source.fileDescriptor)
    }
  }
}
