/// What the loop needs from anything that can be scheduled in a mode (manual and descriptor
/// sources, timers, observers): its binding, the modes it is in, and how to join or leave one.
/// `attachLocked`/`detachLocked` run with the loop's lock held; the callouts they return
/// (a manual source's schedule/cancel callbacks) run after it is released.
protocol LoopItem: AnyObject, Sendable {
  /// Binds to `loop` on first use, under `ItemBinding.bind(to:)`'s rules; returns whether this
  /// call made the binding.
  func bind(to loop: Loop) throws(LoopError) -> Bool
  /// Undoes a binding made by an add that then failed, so the item is free again.
  func unbind()
  /// The loop the item is bound to, until the item is invalidated.
  var owner: Loop? { get }
  var memberModes: [ModeState] { get }
  /// `memberModes.contains(mode)`, without building the array.
  func isMember(of mode: ModeState) -> Bool
  /// `!memberModes.isEmpty`, without building the array.
  var isInAnyModeLocked: Bool { get }
  /// Leaves every mode; returns the callouts to run once the lock is released.
  func detachFromAllLocked(of loop: Loop) -> [Loop.Callout]
  func attachLocked(to mode: ModeState, of loop: Loop) throws(LoopError) -> Loop.Callout?
  func detachLocked(from mode: ModeState, of loop: Loop) -> Loop.Callout?
  /// A line for the loop's debug description.
  func describeLocked() -> String
  /// Makes the item invalid for good and releases its closures (the public `invalidate()`).
  func invalidate()
  /// `invalidate()` when the loop of `thread` is torn down; a port also refuses later sends.
  func invalidate(becauseLoopOf thread: String)
}

extension LoopItem {
  func isMember(of mode: ModeState) -> Bool { memberModes.contains { $0 === mode } }

  var isInAnyModeLocked: Bool { !memberModes.isEmpty }

  func invalidate(becauseLoopOf thread: String) { invalidate() }

  func detachFromAllLocked(of loop: Loop) -> [Loop.Callout] {
    memberModes.compactMap { detachLocked(from: $0, of: loop) }
  }
}

/// An item whose binding is an `ItemBinding` object: every item but the timer, which keeps
/// the same state in itself (see `LoopTimer.binding`).
protocol BoundItem: LoopItem {
  var binding: ItemBinding { get }
}

extension BoundItem {
  func bind(to loop: Loop) throws(LoopError) -> Bool { try binding.bind(to: loop) }
  func unbind() { binding.unbind() }
  var owner: Loop? { binding.owner }

  /// Every such item's `invalidate()`: marks it invalid, leaves every mode (running the cancel
  /// callouts), then takes its closures out with `take` (under `binding.lock`) and releases
  /// them once no lock is held, since a captured object's deinit may call back into the loop.
  /// Only the call that made the item invalid does this: a concurrent second call must not
  /// drop the closures (the cancel callback among them) before the first has detached.
  /// Returns whether this call made the item invalid (and has detached it by now).
  @discardableResult
  func invalidateReleasing<Closures>(_ take: () -> Closures) -> Bool {
    let (wasValid, loop) = binding.invalidate()
    guard wasValid else { return false }
    loop?.detachEverywhere(self)
    let released = binding.lock.withLock(take)
    if binding.releasesOnLoopThread, let loop {
      loop.releaseOnOwnThread(consume released)
    } else {
      withExtendedLifetime(released) {}
    }
    return true
  }
}

extension ManualSource: BoundItem {
  var memberModes: [ModeState] { slots.map(\.mode) }

  func isMember(of mode: ModeState) -> Bool { slots.contains { $0.mode === mode } }

  var isInAnyModeLocked: Bool { !slots.isEmpty }

  func attachLocked(to mode: ModeState, of loop: Loop) throws(LoopError) -> Loop.Callout? {
    slots.append(Slot(mode: mode))
    mode.manualSources.insert(self, slot: slots.count - 1)
    // Signalled before it joined the mode the loop waits in: runnable now, so it goes on the
    // mode's ready sources, and the loop must look again and must not sleep past it (a signal
    // alone never wakes; joining a mode is not a signal).
    let key = signalKey
    if key.signalled {
      mode.ready.insert(self, sequence: key.sequence, stamp: loop.nextReadyStampLocked())
      loop.manualSignals.add(1, ordering: .sequentiallyConsistent)
      loop.wakeIfWaitingLocked(in: mode.mode)
    }
    guard let scheduleCallback else { return nil }
    let name = mode.mode
    return { scheduleCallback(loop, name) }
  }

  func detachLocked(from mode: ModeState, of loop: Loop) -> Loop.Callout? {
    if let position = slots.firstIndex(where: { $0.mode === mode }) {
      let index = slots[position].readyIndex
      if index != ReadySources.absent { mode.ready.remove(at: index) }
      mode.manualSources.remove(at: slots[position].listIndex)
      slots.remove(at: position)
    }
    guard let cancelCallback else { return nil }
    let name = mode.mode
    return { cancelCallback(loop, name) }
  }

  func describeLocked() -> String {
    let state = "signalled: \(isSignalled), valid: \(isValid)"
    return "ManualSource(\(labelPrefix(label))order: \(order), \(state))"
  }
}

extension LoopObserver: BoundItem {
  var memberModes: [ModeState] { modes }

  func attachLocked(to mode: ModeState, of loop: Loop) throws(LoopError) -> Loop.Callout? {
    mode.insertObserver(self)
    modes.append(mode)
    return nil
  }

  func detachLocked(from mode: ModeState, of loop: Loop) -> Loop.Callout? {
    mode.removeObserver(self)
    modes.removeAll { $0 === mode }
    return nil
  }

  func describeLocked() -> String {
    "LoopObserver(activities: \(activities), order: \(order), repeats: \(repeats), valid: \(isValid))"
  }
}

extension LoopTimer: LoopItem {
  var memberModes: [ModeState] { slots.map(\.mode) }

  func isMember(of mode: ModeState) -> Bool { slots.hasSlot(in: mode.timers) }

  var isInAnyModeLocked: Bool { !slots.isEmpty }

  /// Timers have no callouts, so leaving every mode needs no arrays (cancelling a million
  /// timers should cost heap work, not allocations).
  func detachFromAllLocked(of loop: Loop) -> [Loop.Callout] {
    leaveEveryModeLocked(of: loop)
    return []
  }

  /// `detachFromAllLocked` for a caller that knows the item is a timer (a cancel). Goes by
  /// each slot's own record of its heap and index: nothing is looked up.
  func leaveEveryModeLocked(of loop: Loop) {
    while let slot = slots.popFirst() {
      if let index = slot.index { slot.withHeap { $0.remove(at: index) } }
      slot.withMode { mode in
        mode.timerCount -= 1
        loop.timersChangedLocked(in: mode)
      }
    }
  }

  func attachLocked(to mode: ModeState, of loop: Loop) throws(LoopError) -> Loop.Callout? {
    let schedule = binding.lock.withLock { scheduleUnlocked }
    attachLocked(to: mode, of: loop, fireDate: schedule.fireDate, tolerance: schedule.tolerance)
    return nil
  }

  /// Joins `mode` with a schedule the caller already read (under `binding.lock`); the
  /// tolerance in nanoseconds.
  func attachLocked(
    to mode: ModeState, of loop: Loop, fireDate: LoopClock.Instant, tolerance: Int64
  ) {
    mode.timerCount += 1
    if isFiring {
      // Out of every heap until its callout ends; finishing the firing puts it in this one too.
      slots.append(TimerSlot(mode: mode, index: nil))
      return
    }
    mode.timers.insert(self, in: mode, fireDate: fireDate, tolerance: tolerance)
    loop.timersChangedLocked(in: mode)
  }

  func detachLocked(from mode: ModeState, of loop: Loop) -> Loop.Callout? {
    mode.timers.remove(self)
    mode.timerCount -= 1
    loop.timersChangedLocked(in: mode)
    return nil
  }

  func describeLocked() -> String {
    let repeating = interval.map { "every \($0)" } ?? "once"
    let schedule = "next fire: \(fireDate), \(repeating), tolerance: \(tolerance)"
    return "LoopTimer(\(labelPrefix(label))\(schedule), valid: \(isValid))"
  }
}

extension DescriptorSource: BoundItem {
  var memberModes: [ModeState] { registrations.map(\.mode) }

  func attachLocked(to mode: ModeState, of loop: Loop) throws(LoopError) -> Loop.Callout? {
    // A user's descriptor may one day be closed behind the loop's back, and shedding its
    // registration then takes a new epoll set: keep one in reserve from now on, and the
    // witness set that remembers which file the source is for. (Ports' and the main queue's
    // descriptors are never closed while registered.) Made first, so the check below sees
    // their numbers too.
    if !ownsDescriptor { try loop.reserveSpareEpollLocked() }
    // The number may be one the loop opened for itself (a user's fd closed and its number
    // handed to a new mode's epoll set): watching it would wake the loop for its own events.
    try loop.checkNotOwnDescriptorLocked(fileDescriptor)
    // The first add pins the file the number names now; every later one (another mode, a
    // mode joining the common set) must find the number still naming that file, or it
    // would watch whatever file the number was handed to since.
    let pinned = !ownsDescriptor && witness == 0
    if pinned {
      try loop.pinLocked(self)
    } else if !loop.namesOwnFileLocked(self) {
      loop.markStaleEverywhereLocked(self)
      throw Loop.staleDescriptorError(fileDescriptor)
    }
    let first = registrations.isEmpty
    do throws(LoopError) {
      if first { try membership?.willJoinFirstMode() }
      do throws(LoopError) {
        try loop.registerLocked(self, in: mode)
      } catch {
        if first { membership?.didLeaveLastMode() }
        throw error
      }
    } catch {
      if pinned { loop.releaseWitnessLocked(self) }
      throw error
    }
    return nil
  }

  func detachLocked(from mode: ModeState, of loop: Loop) -> Loop.Callout? {
    guard let index = registrations.firstIndex(where: { $0.mode === mode }) else { return nil }
    let registration = registrations.remove(at: index)
    mode.descriptors[registration.token] = nil
    // Unregisters by fd number only if the number is still ours: after close and reuse it may
    // now belong to a newer source, and epoll_ctl(DEL) would silently remove that one instead.
    // (A parked registration is out of the set already.)
    if !registration.parked {
      mode.unregister(fileDescriptor, token: registration.token, waitCount: loop.waitGeneration)
    }
    if mode.tokenForDescriptor[fileDescriptor] == registration.token {
      mode.tokenForDescriptor[fileDescriptor] = nil
    }
    if registrations.isEmpty { membership?.didLeaveLastMode() }
    return nil
  }

  /// Leaves every mode (invalidation) and lets go of the source's witness: a source is never
  /// added again once invalid.
  func detachFromAllLocked(of loop: Loop) -> [Loop.Callout] {
    let callouts = memberModes.compactMap { detachLocked(from: $0, of: loop) }
    loop.releaseWitnessLocked(self)
    return callouts
  }

  func invalidate(becauseLoopOf thread: String) {
    onTeardown?(thread)
    invalidate()
  }

  func describeLocked() -> String {
    let parked =
      registrations.contains { $0.stale }
      ? ", parked: the fd no longer refers to the file it was added with"
      : registrations.contains { $0.parked } ? ", parked after hang-up/error" : ""
    let watch = "fd: \(fileDescriptor), interest: \(interest), order: \(order)"
    return "DescriptorSource(\(labelPrefix(label))\(watch)\(parked))"
  }
}

/// `"name", ` for an item that has a label, nothing otherwise.
private func labelPrefix(_ label: String?) -> String {
  label.map { "\"\($0)\", " } ?? ""
}
