/// The common-mode set: which modes `.common` stands for, and what joining it does. Mirrors
/// `CFRunLoopAddCommonMode`. Safe from any thread.
extension Loop {
  /// Adds `mode` to the common-mode set; every item added to `.common` joins it now.
  /// If an item cannot join (a descriptor that was closed meanwhile), the others still do and
  /// the first error is thrown.
  ///
  /// Blocks queued for `.common` become runnable in `mode`: if the loop is running `mode`, it
  /// is woken to run them, as a `perform` would wake it (CF does not wake here).
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
      if hasBlocksLocked(for: name) { wakeIfRunningLocked(name) }
    }
    for callout in callouts { callout() }
    if let firstError { throw firstError }
  }

  /// Something just became runnable in `mode` without waking the loop by itself (a queued
  /// block, a signalled manual source): wakes the loop if its innermost run is in `mode`, so
  /// a sleep does not outlast work it could do. Timers and descriptors need no help: a
  /// timer's change re-arms the timerfd and a new descriptor joins the epoll set, either of
  /// which the kernel reports. Rare, so it wakes under the lock.
  func wakeIfRunningLocked(_ mode: Mode) {
    guard frames.last?.mode == mode else { return }
    sendHoldingLock(requestWakeLocked())
  }

  /// The modes `.common` stands for; initially just `.default`.
  public var commonModes: Set<Mode> { lock.withLock { Set(commonModeNames) } }
}
