import CRunLoopShims

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
    traceSink(mode.mode)?.record(.activity(activity))
    guard mode.observedActivities.load(ordering: .relaxed) & activity.rawValue != 0 else { return }
    let observers = lock.withLock { mode.observers.filter { $0.activities.contains(activity) } }
    for observer in observers {
      // CF's rule: an observer is never told again while its own callback is still running.
      let handler = lock.withLock { () -> LoopObserver.Handler? in
        guard !observer.isFiring, observer.modes.contains(where: { $0 === mode }),
          let handler = observer.handler
        else { return nil }
        observer.isFiring = true
        return handler
      }
      guard let handler else { continue }
      handler(observer, activity)
      lock.withLock { observer.isFiring = false }
      if !observer.repeats { observer.invalidate() }
    }
  }

  // MARK: Blocks

  /// Runs every queued block that applies to this mode, in queue order. Blocks queued while
  /// these run wait for the next drain, so a block that queues a block cannot recurse.
  func performBlocks(in mode: ModeState) {
    // Take the whole queue in O(1) and sort it out with the lock released, so posters are
    // never held up by a long queue. Blocks for other modes go back in front of anything
    // posted meanwhile, keeping the queue's order.
    var (taken, commonModes) = lock.withLock { () -> ([QueuedBlock], [Mode]) in
      defer { blocks = [] }
      counters.blocksRun += UInt64(blocks.count)  // the rare blocks put back are taken off again
      return (blocks, commonModeNames)
    }
    if !taken.allSatisfy({ $0.applies(to: mode.mode, commonModes: commonModes) }) {
      let kept = taken.filter { !$0.applies(to: mode.mode, commonModes: commonModes) }
      taken.removeAll { !$0.applies(to: mode.mode, commonModes: commonModes) }
      lock.withLock {
        blocks = kept + blocks
        counters.blocksRun -= UInt64(kept.count)
      }
    }
    guard !taken.isEmpty else { return }
    let sink = traceSink(mode.mode)
    let began = sink?.now
    for queued in taken { queued.block() }
    sink?.record(.blocks(count: taken.count), since: began)
  }

  // MARK: Manual sources

  /// Performs signalled manual sources by order, then by signal time. Returns whether any ran.
  func performManualSources(in mode: ModeState, onlyOne: Bool) -> Bool {
    let candidates = lock.withLock { () -> [ManualSource] in
      var signalled: [(source: ManualSource, sequence: UInt64)] = []
      mode.manualSources.visitAll { source in
        let key = source.signalKey
        if key.signalled { signalled.append((source, key.sequence)) }
      }
      return signalled.sorted { ($0.source.order, $0.sequence) < ($1.source.order, $1.sequence) }
        .map(\.source)
    }
    let sink = candidates.isEmpty ? nil : traceSink(mode.mode)
    var handled = false
    for source in candidates {
      let perform = lock.withLock { () -> (@Sendable () -> Void)? in
        // An earlier callout may have removed or invalidated it, or a nested run performed it.
        guard mode.manualSources.contains(source), let perform = source.consumeSignal() else {
          return nil
        }
        counters.sourcesHandled += 1
        return perform
      }
      guard let perform else { continue }
      let began = sink?.now
      perform()
      sink?.record(.manualSource(source.traceName), since: began)
      handled = true
      if onlyOne { break }
    }
    return handled
  }

  // MARK: Waiting

  /// Sleeps in the mode's epoll set until a descriptor, the mode's timer or the wake-up port
  /// fires, or the deadline passes. With `poll` it only looks, without sleeping.
  func waitForEvents(
    in mode: ModeState, until deadline: LoopClock.Instant?, poll: Bool
  ) -> WakeResult {
    var forcePoll = poll
    var spun: [Epoll.Event]?
    // Held for the whole wait: a rebuild may swap the mode's set while we sleep in this one.
    let (epoll, policy) = lock.withLock { () -> (Epoll, WaitPolicy) in
      if mode.timerNeedsArming { mode.rearmTimer() }
      // The wake-up eventfd is drained here, before the next wait, rather than right after
      // the wake: that keeps a read syscall off the path from wake-up to the posted work.
      // A write decided under the lock may land only after this drain (it is made after the
      // poster releases the lock); the wait then returns at once with the eventfd readable,
      // which `wakeFDReadable` catches so the following wait drains it.
      if wakeWritten || wakeFDReadable {
        wakeWritten = false
        wakeFDReadable = false
        _ = try? wakeFD.drain()
      }
      return (mode.epoll, self.policy)
    }
    var spinStart: LoopClock.Instant?  // read only for a tracer: spun work goes out at once
    var didSpin = false
    if !forcePoll && !wakePending.load(ordering: .acquiring) {
      let traced = tracing.load(ordering: .relaxed)
      switch policy {
      case .sleep: break
      case .spinThenSleep(let window):
        (didSpin, spinStart) = (true, traced ? .now : nil)
        spun = spin(on: epoll, window: window, until: deadline)
      case .busyWait:
        (didSpin, spinStart) = (true, traced ? .now : nil)
        spun = spin(on: epoll, window: nil, until: deadline)
      }
    }
    let spinEnd = spinStart.map { _ in LoopClock.Instant.now }
    // A spin that ran into the deadline leaves nothing to sleep for. (The clock is read only
    // when the window ran out, on the way to a sleep.)
    if didSpin, spun == nil, let deadline, deadline <= .now { forcePoll = true }
    lock.withLock {
      // Someone asked for a wake while we were busy: answer it by not sleeping.
      if wakeRequested {
        wakeRequested = false
        wakePending.store(false, ordering: .relaxed)
        forcePoll = true
      }
      sleeping = !forcePoll && spun == nil
    }
    var count: Int?
    let blocked = !forcePoll && spun == nil
    let sleptAt = blocked ? LoopClock.Instant.now : nil
    while spun == nil && count == nil {
      // Recomputed on every try, so signals interrupting the wait never stretch the deadline.
      var timeout: Int64 = -1
      if forcePoll {
        timeout = 0
      } else if let deadline {
        timeout = max(0, LoopClock.Instant.now.duration(to: deadline).saturatedNanoseconds)
      }
      do {
        count = try epoll.wait(timeoutNanoseconds: timeout)
      } catch {
        preconditionFailure("waiting on the epoll set of mode \(mode.mode) failed: \(error)")
      }
    }
    var result = WakeResult()
    let wokeAt = sleptAt.map { _ in LoopClock.Instant.now }
    // Asked for after the wait, so a tracer attached while the loop slept records that sleep.
    let sink = traceSink(mode.mode)
    var wokenBy: [LoopTracer.WakeCause] = []
    lock.withLock {
      sleeping = false
      waitGeneration &+= 1
      var causes = WakeCauses()
      let events = spun ?? []
      for index in 0..<(spun?.count ?? count ?? 0) {
        let event = spun == nil ? epoll.event(index) : events[index]
        switch event.token {
        case ModeState.wakeToken:
          wakeFDReadable = true
          causes.wakeUp = 1
          if sink != nil { wokenBy.append(.wakeUp) }
        case ModeState.timerToken:
          result.timerExpired = true
          causes.timer = 1
          if sink != nil { wokenBy.append(.timer) }
        default:
          result.ready.append(event)
          let source = mode.descriptors[event.token]
          if source?.isPort == true {
            causes.port = 1
          } else {
            causes.descriptor = 1
          }
          if sink != nil { wokenBy.append(source?.wakeCause ?? .unregisteredDescriptor) }
        }
      }
      if let sleptAt, let wokeAt {
        counters.timeAsleep += sleptAt.duration(to: wokeAt)
        if causes == WakeCauses() { causes.timeout = 1 }
        counters.wakes.port += causes.port
        counters.wakes.descriptor += causes.descriptor
        counters.wakes.timer += causes.timer
        counters.wakes.wakeUp += causes.wakeUp
        counters.wakes.timeout += causes.timeout
      }
    }
    if let sink, let spinStart, let spinEnd {
      // Found nothing in the window (nil), a posted wake-up (no events), or descriptors.
      let found = spun.map { $0.isEmpty ? [.wakeUp] : wokenBy } ?? []
      sink.record(.spun(wokenBy: found), from: spinStart, to: spinEnd)
    }
    if let sink, let sleptAt, let wokeAt {
      sink.record(
        .slept(wokenBy: wokenBy.isEmpty ? [.deadline] : wokenBy), from: sleptAt, to: wokeAt)
    }
    return result
  }

  // MARK: Timers

  /// A mode's timers changed. Re-arming its timerfd is a syscall, and an expensive one in a VM
  /// (it reprograms the hardware timer), so on the loop's own thread it is deferred to the
  /// loop's next wait on that mode — firing a batch of a thousand timers then costs one
  /// re-arm, not a thousand. Another thread cannot know when the loop will next look, so
  /// changes from there re-arm at once: a sleeping loop must wake for a new earlier timer.
  func timersChangedLocked(in mode: ModeState) {
    if pthread_equal(pthread_self(), thread) != 0 {
      mode.timerNeedsArming = true
    } else {
      mode.rearmTimer()
    }
  }

  /// Fires every timer of this mode whose fire date has come, earliest first. Like CF, the
  /// due timers are only candidates: each is checked again right before its own callout, since
  /// an earlier handler may have removed, invalidated or postponed it, or a nested run may have
  /// fired it already.
  func fireTimers(in mode: ModeState) {
    let now = LoopClock.Instant.now
    let candidates = lock.withLock { () -> [LoopTimer] in
      _ = try? mode.timerFD.acknowledge()
      return mode.timers.due(at: now)
    }
    let sink = candidates.isEmpty ? nil : traceSink(mode.mode)
    for timer in candidates {
      guard let (firedAt, handler) = lock.withLock({ beginFiringLocked(timer, in: mode, now: now) })
      else { continue }
      let began = sink?.now
      handler(timer)
      if let sink, let began {
        sink.record(
          .timer(timer.traceName, lateness: firedAt.duration(to: began)), since: began)
      }
      if timer.interval == nil { timer.invalidate() }
      lock.withLock { finishFiringLocked(timer, firedAt: firedAt) }
    }
    lock.withLock { timersChangedLocked(in: mode) }
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
    // The handler is copied only when it will be returned: a copy dropped here could be the
    // last reference (a concurrent invalidate) and would be released under the loop's lock.
    let fireDate = timer.fireDate
    guard fireDate <= now, let handler = timer.binding.lock.withLock({ timer.handlerUnlocked })
    else { return nil }
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
  /// it is in now, including modes it joined during its own callout.
  private func finishFiringLocked(_ timer: LoopTimer, firedAt: LoopClock.Instant) {
    timer.isFiring = false
    firingTimers.removeAll { $0 === timer }
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
      timersChangedLocked(in: slot.mode)
    }
  }

  // MARK: Descriptor sources

  /// Calls the handler of each ready descriptor source, by order. Returns whether any ran.
  func handleDescriptors(_ ready: [Epoll.Event], in mode: ModeState, onlyOne: Bool) -> Bool {
    guard !ready.isEmpty else { return false }
    let (deliveries, generation) = lock.withLock { () -> ([Delivery], UInt64) in
      var deliveries: [Delivery] = []
      var stale: [Delivery] = []
      var unattributed = false
      for event in ready {
        guard let source = mode.descriptors[event.token],
          source.registrations.contains(where: { $0.token == event.token && !$0.parked })
        else {
          // An event we cannot attribute (or one for a parked registration) comes from a
          // registration the kernel still holds for a file whose fd number we no longer own:
          // its fd was closed while the file stayed open elsewhere.
          unattributed = true
          continue
        }
        guard isCurrentLocked(source, token: event.token, in: mode) else {
          markStaleLocked(source, token: event.token, in: mode)
          stale.append(Delivery(source: source, token: event.token, raw: 0, stale: true))
          continue
        }
        deliveries.append(Delivery(source: source, token: event.token, raw: event.events))
      }
      // epoll_ctl(DEL) cannot name a file whose fd number we no longer own, so one rebuild
      // sheds all of them, and finds any other registration gone stale on the way.
      if unattributed || !stale.isEmpty {
        stale += rebuildEpollSetLocked(mode).map {
          Delivery(source: $0, token: $1, raw: 0, stale: true)
        }
      }
      // Stale reports go first: they are told even when the pass stops after one source.
      let byOrder = { (a: Delivery, b: Delivery) in a.source.order < b.source.order }
      return (stale.sorted(by: byOrder) + deliveries.sorted(by: byOrder), waitGeneration)
    }
    let sink = traceSink(mode.mode)
    var handled = false
    for delivery in deliveries {
      let source = delivery.source
      let handler = lock.withLock { () -> DescriptorSource.Handler? in
        // A nested run inside an earlier handler has waited (and maybe served this source)
        // since these events were read; epoll is level-triggered, so whatever is still ready
        // will be reported again on the next wait. (A stale fd is reported now or never.)
        guard delivery.stale || waitGeneration == generation else { return nil }
        // An earlier handler may have removed or invalidated this source.
        guard mode.descriptors[delivery.token] === source, let handler = source.handler else {
          return nil
        }
        if !delivery.stale {
          if delivery.raw & (CRL_EPOLLHUP | CRL_EPOLLERR) != 0 {
            parkLocked(source, token: delivery.token, in: mode)
          }
          counters.sourcesHandled += 1
        }
        return handler
      }
      guard let handler else { continue }
      let events =
        delivery.stale
        ? [.error, .invalidDescriptor] : DescriptorSource.events(fromEpoll: delivery.raw)
      let began = sink?.now
      handler(source, events)
      sink?.record(source.traceKind(events), since: began)
      // A stale report tells the source about its own misuse; it is not the source firing,
      // so it neither counts as a handled source nor ends a pass that stops after one.
      if delivery.stale { continue }
      handled = true
      if onlyOne { break }
    }
    return handled
  }

  /// One event to hand to a descriptor source: its epoll bits, or a stale-descriptor report.
  struct Delivery {
    let source: DescriptorSource
    let token: UInt64
    let raw: UInt32
    var stale = false
  }

  /// Whether a source's registration still watches the file its fd number names now. The
  /// kernel keeps a registration for as long as its *file* is open, not its fd: closed while a
  /// `dup` (or a child process) holds the file, the registration goes on reporting a file
  /// the source can no longer read, level-triggered, on every pass — a 100 % CPU spin. The
  /// check costs one epoll_ctl per event; ports skip it, since their eventfd is the loop's.
  func isCurrentLocked(
    _ source: DescriptorSource, token: UInt64, in mode: ModeState
  ) -> Bool {
    if source.isPort { return true }
    let fd = source.fileDescriptor
    // A newer source owns the number in this set, so this registration's file is not fd's.
    guard mode.tokenForDescriptor[fd] == token else { return false }
    let mask = source.binding.lock.withLock { source.epollMaskUnlocked }
    return mode.epoll.isRegistered(fd, events: mask, token: token)
  }

  /// Parks a registration whose fd no longer names its file, for good (`setInterest` refuses
  /// a stale source). The caller rebuilds the epoll set to shed it: epoll_ctl(DEL) would name
  /// whatever file the number points to now, or fail.
  private func markStaleLocked(_ source: DescriptorSource, token: UInt64, in mode: ModeState) {
    guard let index = source.registrations.firstIndex(where: { $0.token == token }) else { return }
    source.registrations[index].parked = true
    source.registrations[index].stale = true
    if mode.tokenForDescriptor[source.fileDescriptor] == token {
      mode.tokenForDescriptor[source.fileDescriptor] = nil
    }
    counters.staleDescriptors += 1
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

  /// Replaces the mode's epoll set with a fresh one holding the wake-up eventfd, the timerfd
  /// and every live registration whose fd number is still ours. The loop may be asleep in the
  /// old set (it holds a reference to it), so it is woken to move over. Returns the
  /// registrations it found stale and parked, so the caller can report them.
  func rebuildEpollSetLocked(_ mode: ModeState) -> [(DescriptorSource, UInt64)] {
    var live: [(fd: Int32, mask: UInt32, token: UInt64)] = []
    var stale: [(DescriptorSource, UInt64)] = []
    for (token, source) in mode.descriptors {
      guard mode.tokenForDescriptor[source.fileDescriptor] == token,
        source.registrations.contains(where: { $0.token == token && !$0.parked })
      else { continue }
      // Re-adding by number would quietly move a source whose fd was closed and reused onto
      // the new file; one whose number no longer names its file stays out, parked as stale.
      guard isCurrentLocked(source, token: token, in: mode) else {
        markStaleLocked(source, token: token, in: mode)
        stale.append((source, token))
        continue
      }
      live.append(
        (source.fileDescriptor, source.binding.lock.withLock { source.epollMaskUnlocked }, token))
    }
    let refused: [UInt64]
    do {
      refused = try mode.replaceEpollSet(wakeFD: wakeFD, registrations: live)
    } catch {
      preconditionFailure("rebuilding the epoll set of mode \(mode.mode) failed: \(error)")
    }
    // Descriptors closed without removing their source can no longer be registered: they
    // are dead, so they stay out of the set like a hung-up one.
    for token in refused {
      guard let source = mode.descriptors[token],
        let index = source.registrations.firstIndex(where: { $0.token == token })
      else { continue }
      source.registrations[index].parked = true
    }
    epollRebuilds += 1
    _ = requestWakeLocked()  // on the loop thread: sets the flag, never writes
    return stale
  }
}
