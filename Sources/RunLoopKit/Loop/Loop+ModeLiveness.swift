/// Whether a mode has anything to run: what keeps a run going, and what lets one begin. As in
/// CF, sources and timers keep a mode alive and observers do not; queued blocks for the mode
/// count too. The caller holds the loop's lock.
extension Loop {
  /// The mode's state if it exists and has something to run; nil otherwise.
  func liveModeLocked(_ name: Mode) -> ModeState? {
    guard !tornDown, name != .common, !name.name.isEmpty else { return nil }
    // The mode found last (`modeLocked`'s shortcut): a loop run over and over in one mode
    // compares the name instead of hashing it on every run.
    if let last = lastModeFound, last._withUnsafeGuaranteedRef({ $0.mode == name }) {
      let mode = last.takeUnretainedValue()
      return isEmptyLocked(mode) ? nil : mode
    }
    if let mode = modeStates[name] {
      lastModeFound = Unmanaged.passUnretained(mode)
      return isEmptyLocked(mode) ? nil : mode
    }
    // Queued blocks alone keep a mode alive, even one nothing was ever added to. (Out of
    // descriptors, the mode cannot be made: the run returns, and the blocks stay queued.)
    guard hasBlocksLocked(for: name) else { return nil }
    return try? modeLocked(name)
  }

  func isEmptyLocked(_ mode: ModeState) -> Bool {
    if tornDown { return true }
    if mode.hasSourcesOrTimers { return false }
    return !hasBlocksLocked(for: mode.mode)
  }

  /// Whether a queued block would run in `mode`.
  func hasBlocksLocked(for mode: Mode) -> Bool {
    let target = QueuedBlock.Target(mode, commonModes: commonModeNames)
    if blocks.contains(where: { $0.applies(to: target) }) { return true }
    if posted.mayContain(where: { $0.applies(to: target) }) { return true }
    guard !deferredBlocks.isEmpty, deferredBlocksSkip != target else { return false }
    return deferredBlocks.contains { $0.applies(to: target) }
  }
}
