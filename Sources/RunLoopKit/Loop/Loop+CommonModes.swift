/// The common-mode set: which modes `.common` stands for, and what joining it does. Mirrors
/// `CFRunLoopAddCommonMode`. Safe from any thread.
extension Loop {
  /// Adds `mode` to the common-mode set; every item added to `.common` joins it now.
  /// If an item cannot join (a descriptor that was closed meanwhile), the others still do and
  /// the first error is thrown.
  ///
  /// Blocks queued for `.common` become runnable in `mode`: if the loop is running `mode` (or
  /// waits in it between an embedding's passes), it is woken to run them, as a `perform`
  /// would wake it (CF does not wake here).
  public func addCommonMode(_ name: Mode) throws(LoopError) {
    var callouts: [Callout] = []
    var firstError: LoopError?
    try lock.withLock { () throws(LoopError) in
      try checkUsableLocked(name)
      guard !commonModeNames.contains(name) else { return }
      // Create the mode first: if that fails the set is unchanged and a retry can succeed.
      let mode = try modeLocked(name)
      commonModeNames.append(name)
      mode.isCommon = true
      for item in commonItems.inOrder where !item.isMember(of: mode) {
        do throws(LoopError) {
          if let callout = try item.attachLocked(to: mode, of: self) { callouts.append(callout) }
        } catch {
          firstError = firstError ?? error
        }
      }
      if hasBlocksLocked(for: name) { wakeIfWaitingLocked(in: name) }
    }
    for callout in callouts { callout() }
    if let firstError { throw firstError }
  }

  /// Something just became runnable in `mode` without waking the loop by itself (a queued
  /// block, a signalled manual source, a virtual loop's timer now due): wakes the loop if
  /// `mode` is where it waits now (`waitingModeLocked`), so a sleep does not outlast work it
  /// could do. Descriptors need no help: a new one joins the epoll set, which the kernel
  /// reports, and a real timer's change re-arms what ends the sleep. Rare, so it wakes under
  /// the lock.
  func wakeIfWaitingLocked(in mode: Mode) {
    guard waitingModeLocked == mode else { return }
    sendHoldingLock(requestWakeLocked())
  }

  /// The one mode whose work the loop would sleep through now, whichever way it sleeps: a
  /// `VirtualLoop` waiting for other threads in `runUntil`, the embedded mode between its
  /// host's passes (no run is active then), or the innermost run, nested or not (a nested
  /// run's return makes the run below look again: see `runOwnMode`). Nil when none.
  var waitingModeLocked: Mode? {
    if let outsideWorkMode { return outsideWorkMode }
    if frames.isEmpty, embeddedIdle.load(ordering: .relaxed) { return embeddedMode?.mode }
    return frames.last?.mode
  }

  /// The modes `.common` stands for; initially just `.default`.
  public var commonModes: Set<Mode> { lock.withLock { Set(commonModeNames) } }
}
