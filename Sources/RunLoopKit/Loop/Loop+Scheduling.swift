/// Adding, removing and finding items (the common-mode set is in Loop+CommonModes.swift).
/// Everything here is safe from any thread. Schedule and cancel callbacks run after the
/// loop's lock is released.
extension Loop {
  typealias Callout = () -> Void

  // MARK: Manual sources

  /// Adds a manual source to `mode` (or to every common mode with `.common`) and calls its
  /// schedule callback once per mode it joins. Adding it again to the same mode does nothing.
  public func add(_ source: ManualSource, to mode: Mode) throws(LoopError) {
    try addItem(source, to: mode)
  }
  /// Removes the source from `mode` (from every common mode with `.common`), calling its cancel
  /// callback once per mode it leaves. Mirrors `CFRunLoopRemoveSource`.
  public func remove(_ source: ManualSource, from mode: Mode) { removeItem(source, from: mode) }
  /// Whether the source is in `mode`; for `.common`, whether it was added to `.common`.
  /// Mirrors `CFRunLoopContainsSource`.
  public func contains(_ source: ManualSource, in mode: Mode) -> Bool {
    containsItem(source, in: mode)
  }

  // MARK: Descriptor sources

  /// Registers the source's descriptor in `mode`'s epoll set. Throws (and leaves nothing
  /// registered in any mode) for a closed or invalid fd, a regular file, or an fd already
  /// registered in that mode by another source.
  public func add(_ source: DescriptorSource, to mode: Mode) throws(LoopError) {
    try addItem(source, to: mode)
  }
  /// Unregisters the source's descriptor from `mode` (from every common mode with `.common`).
  /// Mirrors `CFRunLoopRemoveSource`.
  public func remove(_ source: DescriptorSource, from mode: Mode) { removeItem(source, from: mode) }
  /// Whether the source is in `mode`; for `.common`, whether it was added to `.common`.
  /// Mirrors `CFRunLoopContainsSource`.
  public func contains(_ source: DescriptorSource, in mode: Mode) -> Bool {
    containsItem(source, in: mode)
  }

  // MARK: Ports

  /// Schedules the port in `mode` (or in every common mode with `.common`), as
  /// `CFRunLoopAddSource` does with a Mach port's source. Throws as for a descriptor source.
  public func add<Message>(_ port: LoopPort<Message>, to mode: Mode) throws(LoopError) {
    try addItem(port.source, to: mode)
  }
  /// Takes the port out of `mode` (out of every common mode with `.common`); messages already
  /// sent stay queued. Mirrors `CFRunLoopRemoveSource`.
  public func remove<Message>(_ port: LoopPort<Message>, from mode: Mode) {
    removeItem(port.source, from: mode)
  }
  /// Whether the port is in `mode`; for `.common`, whether it was added to `.common`.
  /// Mirrors `CFRunLoopContainsSource`.
  public func contains<Message>(_ port: LoopPort<Message>, in mode: Mode) -> Bool {
    containsItem(port.source, in: mode)
  }

  // MARK: Timers

  /// Schedules a timer in `mode`. Throws if the timer belongs to another loop or was invalidated.
  public func add(_ timer: LoopTimer, to mode: Mode) throws(LoopError) {
    if mode == .common {
      // Set before it can join the common items, so cancelling it knows to look there.
      timer.mayBeCommon.store(true, ordering: .relaxed)
      return try addItem(timer, to: mode)
    }
    try lock.withLock { () throws(LoopError) in try addTimerLocked(timer, to: mode, fresh: false) }
  }

  /// `add(_:to:)` for a timer the caller made just now on this loop's thread, which no other
  /// thread can reach yet (`IsolatedLoop.addTimer`): binding it takes no lock of its own.
  func addFreshTimer(_ timer: LoopTimer, to mode: Mode) throws(LoopError) {
    if mode == .common { return try add(timer, to: mode) }
    try lock.withLock { () throws(LoopError) in try addTimerLocked(timer, to: mode, fresh: true) }
  }
  /// Takes the timer out of `mode` (out of every common mode with `.common`) without
  /// invalidating it. Mirrors `CFRunLoopRemoveTimer`.
  public func remove(_ timer: LoopTimer, from mode: Mode) { removeItem(timer, from: mode) }
  /// Whether the timer is in `mode`; for `.common`, whether it was added to `.common`.
  /// Mirrors `CFRunLoopContainsTimer`.
  public func contains(_ timer: LoopTimer, in mode: Mode) -> Bool { containsItem(timer, in: mode) }

  // MARK: Observers

  /// Adds the observer to `mode` (or to every common mode with `.common`). Mirrors
  /// `CFRunLoopAddObserver`; throws if it belongs to another loop or was invalidated.
  public func add(_ observer: LoopObserver, to mode: Mode) throws(LoopError) {
    try addItem(observer, to: mode)
  }
  /// Removes the observer from `mode` (from every common mode with `.common`) without
  /// invalidating it. Mirrors `CFRunLoopRemoveObserver`.
  public func remove(_ observer: LoopObserver, from mode: Mode) { removeItem(observer, from: mode) }
  /// Whether the observer is in `mode`; for `.common`, whether it was added to `.common`.
  /// Mirrors `CFRunLoopContainsObserver`.
  public func contains(_ observer: LoopObserver, in mode: Mode) -> Bool {
    containsItem(observer, in: mode)
  }

  /// The earliest pending fire date among the mode's timers (for `.common`, among all common
  /// modes), or nil when it has none. Timers whose handler is running are not pending.
  public func nextTimerFireDate(in name: Mode) -> LoopClock.Instant? {
    lock.withLock {
      let names = name == .common ? commonModeNames : [name]
      return names.compactMap { modeStates[$0]?.timers.earliest?.fireDate }.min()
    }
  }

  // MARK: - The shared implementation

  func addItem(_ item: some LoopItem, to name: Mode) throws(LoopError) {
    var callouts: [Callout] = []
    try lock.withLock { () throws(LoopError) in
      try checkAddableLocked(to: name)
      let newlyBound = try item.bind(to: self)
      if newlyBound && item is LoopTimer { timersBound &+= 1 }
      do throws(LoopError) {
        if name == .common {
          guard !commonItems.contains(item) else { return }
          callouts = try attachAllOrNoneLocked(item, to: commonModeNames)
          commonItems.insert(item)
        } else {
          callouts = try attachOneLocked(item, to: name)
        }
      } catch {
        // Nothing half-done: an item refused on its first add is not bound to this loop.
        if newlyBound && item.memberModes.isEmpty {
          item.unbind()
          // Signalled while it was bound (a signal hands the source over under the lock
          // `unbind` takes, so every such hand-over is done): this inbox must not keep it,
          // or the next look would read the modes of whichever loop it joins next.
          if let source = item as? ManualSource { signalInbox.remove(source) }
        }
        throw error
      }
    }
    for callout in callouts { callout() }
  }

  /// `addItem` for a timer and one named mode, the usual add, with the same checks in the same
  /// order: binding it and reading its schedule take one hold of its lock, and there are no
  /// callouts to collect. Adding a million timers should cost heap work, not bookkeeping.
  ///
  /// The mode found last (`lastModeFound`) exists, so its name passed `checkAddableLocked`'s
  /// rules and finding it cannot fail: an add that names it checks only that the thread has not
  /// exited, binds, and joins, with no lookup and nothing to undo.
  @inline(__always)
  private func addTimerLocked(_ timer: LoopTimer, to name: Mode, fresh: Bool) throws(LoopError) {
    let mode: Unmanaged<ModeState>
    let schedule: (newlyBound: Bool, fireDate: LoopClock.Instant, tolerance: Int64)
    if !tornDown, let last = lastModeFound, last._withUnsafeGuaranteedRef({ $0.mode == name }) {
      mode = last
      schedule = try bindTimerLocked(timer, fresh: fresh)
    } else {
      try checkAddableLocked(to: name)
      schedule = try bindTimerLocked(timer, fresh: fresh)
      do throws(LoopError) {
        mode = try unmanagedModeLocked(name)
      } catch {
        if schedule.newlyBound && timer.slots.isEmpty { timer.unbind() }
        throw error
      }
    }
    if schedule.newlyBound { timersBound &+= 1 }
    mode._withUnsafeGuaranteedRef { mode in
      // A timer bound just now is in no mode yet: no need to look.
      if !schedule.newlyBound && timer.isMember(of: mode) { return }
      timer.attachLocked(
        to: mode, of: self, fireDate: schedule.fireDate, tolerance: schedule.tolerance)
    }
  }

  /// Binds `timer` and reads its schedule: without its lock when `fresh` (see `addFreshTimer`).
  @inline(__always)
  private func bindTimerLocked(
    _ timer: LoopTimer, fresh: Bool
  ) throws(LoopError) -> (newlyBound: Bool, fireDate: LoopClock.Instant, tolerance: Int64) {
    fresh ? try timer.bindFreshReadingSchedule(to: self) : try timer.bindReadingSchedule(to: self)
  }

  /// Joins every listed mode, or none: if one fails, those already joined are left again.
  private func attachAllOrNoneLocked(
    _ item: some LoopItem, to names: [Mode]
  ) throws(LoopError) -> [Callout] {
    if names.count == 1 { return try attachOneLocked(item, to: names[0]) }
    var joined: [ModeState] = []
    var callouts: [Callout] = []
    do throws(LoopError) {
      for name in names {
        let mode = try modeLocked(name)
        if item.isMember(of: mode) { continue }
        if let callout = try item.attachLocked(to: mode, of: self) { callouts.append(callout) }
        joined.append(mode)
      }
    } catch {
      // No schedule callback has run yet, so leaving needs no cancel callback either.
      for mode in joined { _ = item.detachLocked(from: mode, of: self) }
      throw error
    }
    return callouts
  }

  /// One mode (the usual add): nothing to roll back, so no bookkeeping to allocate.
  private func attachOneLocked(_ item: some LoopItem, to name: Mode) throws(LoopError) -> [Callout]
  {
    let mode = try modeLocked(name)
    if item.isMember(of: mode) { return [] }
    guard let callout = try item.attachLocked(to: mode, of: self) else { return [] }
    return [callout]
  }

  func removeItem(_ item: some LoopItem, from name: Mode) {
    var swept: [any LoopItem] = []  // released after the lock, like everything the loop drops
    let callouts = lock.withLock { () -> [Callout] in
      guard item.owner === self else { return [] }
      var targets: [ModeState]
      if name == .common {
        commonItems.remove(item)
        targets = commonModeNames.compactMap { modeStates[$0] }
      } else {
        targets = modeStates[name].map { [$0] } ?? []
      }
      targets = targets.filter { item.isMember(of: $0) }
      let callouts = targets.compactMap { item.detachLocked(from: $0, of: self) }
      // Still bound, now in no mode: teardown must find it all the same.
      if !item.isInAnyModeLocked && !commonItems.contains(item) {
        swept = unscheduledItems.insert(item)
      }
      return callouts
    }
    for callout in callouts { callout() }
    withExtendedLifetime(swept) {}
  }

  func containsItem(_ item: some LoopItem, in name: Mode) -> Bool {
    lock.withLock {
      if name == .common { return commonItems.contains(item) }
      // An item of another loop is in none of this loop's modes, and its list of modes is
      // guarded by that loop's lock, not this one: reading it here would race with that loop.
      guard item.owner === self, let mode = modeStates[name] else { return false }
      return item.isMember(of: mode)
    }
  }

  /// Removes an invalidated item from every mode and from the common items.
  func detachEverywhere(_ item: some LoopItem) {
    let callouts = lock.withLock { () -> [Callout] in
      if !commonItems.isEmpty { commonItems.remove(item) }
      if !unscheduledItems.isEmpty { unscheduledItems.remove(item) }
      return item.detachFromAllLocked(of: self)
    }
    for callout in callouts { callout() }
  }

  /// `detachEverywhere` for an invalidated timer (see `retireTimerLocked`).
  func detachTimerEverywhere(_ timer: LoopTimer) {
    lock.withLock { retireTimerLocked(timer) }
  }

  /// Takes an invalid timer out of every mode and set of this loop. The one place that
  /// detaches an invalidated timer, under the loop's lock, whoever gets there first:
  ///
  /// `invalidate()` marks a timer invalid under its own lock and detaches it under this one,
  /// so between the two the timer is invalid but still in its modes. The loop can meet it so:
  /// a callout that ends in that window (`finishFiringLocked`) finds the timer out of every
  /// heap, and a slot out of every heap is one teardown cannot see, so it must retire the
  /// timer itself rather than leave the slot pointing at a mode that teardown may free. A timer
  /// still in its heaps is reached by teardown. Whoever comes second finds no slot left.
  ///
  /// A timer never added to `.common` skips the common set's hash lookup, which a cancel
  /// would otherwise pay whenever the loop has any common item (a resident thread's loop
  /// always has).
  func retireTimerLocked(_ timer: LoopTimer) {
    if timer.mayBeCommon.load(ordering: .relaxed) && !commonItems.isEmpty {
      commonItems.remove(timer)
    }
    if !unscheduledItems.isEmpty { unscheduledItems.remove(timer) }
    timer.leaveEveryModeLocked(of: self)
  }

  /// Applies a change to a timer's fire date or tolerance and re-keys it in every heap.
  func reschedule(_ timer: LoopTimer, _ change: () -> Void) {
    lock.withLock {
      let schedule = timer.binding.lock.withLock {
        change()
        return timer.scheduleUnlocked
      }
      for slot in timer.slots where slot.index != nil {
        slot.heap.update(timer, fireDate: schedule.fireDate, tolerance: schedule.tolerance)
        timersChangedLocked(in: slot.mode)
      }
    }
  }

  /// Applies a new interest to every registration of a descriptor source, un-parking it.
  func changeInterest(
    of source: DescriptorSource, to interest: DescriptorSource.Events, _ change: () -> Void
  ) throws(LoopError) {
    try lock.withLock { () throws(LoopError) in
      // A stale source's number names some other file now (often the loop's own rebuilt epoll
      // set): un-parking it would watch that file. Stale is final. (A parked registration
      // that could not be removed by its number is stale too: see `parkLocked`.)
      guard !source.registrations.contains(where: \.stale) else {
        throw Loop.staleDescriptorError(source.fileDescriptor)
      }
      // A parked registration is out of its set; its number may have been closed and handed
      // to another file since (one of the loop's own descriptors, or any other). It goes
      // back only if the number still names the source's file.
      let fd = source.fileDescriptor
      let resumes = source.registrations.contains {
        $0.parked && $0.mode.tokenForDescriptor[fd] == $0.token
      }
      if resumes {
        try checkNotOwnDescriptorLocked(fd)
        guard namesOwnFileLocked(source) else {
          markStaleEverywhereLocked(source)
          throw Loop.staleDescriptorError(fd)
        }
      }
      let mask = source.binding.lock.withLock {
        change()
        return source.epollMaskUnlocked
      }
      for index in source.registrations.indices {
        let registration = source.registrations[index]
        let mode = registration.mode
        guard mode.tokenForDescriptor[source.fileDescriptor] == registration.token else { continue }
        if registration.parked {
          try mode.epoll.add(source.fileDescriptor, events: mask, token: registration.token)
          source.registrations[index].parked = false
        } else {
          try mode.epoll.modify(source.fileDescriptor, events: mask, token: registration.token)
        }
        // The kernel took the number as the registered file's: confirmed again.
        source.registrations[index].calledSinceConfirmed = false
        source.registrations[index].deliverUnchecked = false
      }
    }
  }
}
