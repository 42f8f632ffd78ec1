/// How signalled manual sources reach the manual-source phase: the inbox a signal appends to,
/// the ready sources of each mode (`ReadySources`), and taking the next source to perform.
/// Everything here is called with the loop's lock held.
extension Loop {
  /// The next stamp for an entry of the ready sources.
  @inline(__always)
  func nextReadyStampLocked() -> UInt64 {
    readyStamps &+= 1
    return readyStamps
  }

  /// Moves every source signalled since the last call from the inbox to the ready sources of
  /// each mode it is in: O(what was signalled), whatever the modes hold.
  func takeSignalInboxLocked() {
    signalInbox.take(swapping: &inboxBuffer)
    // In the order signalled, so they join the ready queue of `ReadySources` rather than its
    // heap; emptied now, so the references go: a source the program let go of should not wait
    // for a signal. One source (the common case) is popped: `removeAll(keepingCapacity:)`
    // costs ~250 instructions of its own.
    switch inboxBuffer.count {
    case 0: return
    case 1: placeSignalledLocked(inboxBuffer.removeLast())
    default:
      for index in inboxBuffer.indices { placeSignalledLocked(inboxBuffer[index]) }
      inboxBuffer.removeAll(keepingCapacity: true)
    }
    // A flood's buffer is let go rather than kept for good.
    if inboxBuffer.capacity > 4_096 { inboxBuffer = [] }
  }

  /// Puts a source from the inbox among the ready sources of each mode it is in, unless it
  /// was performed, invalidated or placed already since it was appended. (A source placed
  /// already has not changed its sequence: only a perform clears the flag, and that takes the
  /// source out of the ready sources of every mode.)
  @inline(__always)
  private func placeSignalledLocked(_ source: ManualSource) {
    let key = source.signalKey
    guard key.signalled else { return }
    for position in source.slots.indices
    where source.slots[position].readyIndex == ReadySources.absent {
      source.slots[position].mode.ready.insert(
        source, sequence: key.sequence, stamp: nextReadyStampLocked())
    }
  }

  /// Takes the first source of `mode`'s ready sources that was there by `cutoff` (a stamp),
  /// clears its signal and returns it with its callback; nil when none is left. Sources that
  /// joined them later (a nested run took the inbox, or a signalled source joined the
  /// mode, during this phase) stay for the next phase, as CF leaves sources signalled after
  /// its walk.
  func takeReadySourceLocked(
    in mode: ModeState, stampedBy cutoff: UInt64
  ) -> (source: ManualSource, perform: () -> Void)? {
    while let popped = mode.ready.popFirst() {
      let entry = popped.stamp > cutoff ? firstEntry(after: popped, in: mode, by: cutoff) : popped
      guard let entry else { return nil }
      let source = entry.source
      guard let perform = takeSignalLocked(source) else { continue }
      return (source, perform)
    }
    return nil
  }

  /// `takeReadySourceLocked` popped `newer`, an entry that joined after `cutoff`:
  /// pops on to the first entry that was there by then and returns it, putting the newer ones
  /// back. Rare (a nested run, or a signalled source joining the mode, during the phase), so
  /// kept out of line.
  @inline(never)
  private func firstEntry(
    after newer: ReadySources.Entry, in mode: ModeState, by cutoff: UInt64
  ) -> ReadySources.Entry? {
    var later = [newer]
    var found: ReadySources.Entry?
    while let entry = mode.ready.popFirst() {
      guard entry.stamp > cutoff else {
        found = entry
        break
      }
      later.append(entry)
    }
    for entry in later {
      mode.ready.insert(entry.source, sequence: entry.sequence, stamp: entry.stamp)
    }
    return found
  }

  /// Clears the source's signal and takes it out of the ready sources of every mode; returns
  /// its callback, or nil if it was not signalled or is no longer valid.
  func takeSignalLocked(_ source: ManualSource) -> (() -> Void)? {
    // By position, not over a copy of `slots`: each removal writes the source's index there.
    for position in source.slots.indices {
      let index = source.slots[position].readyIndex
      if index != ReadySources.absent { source.slots[position].mode.ready.remove(at: index) }
    }
    return source.consumeSignal()
  }
}
