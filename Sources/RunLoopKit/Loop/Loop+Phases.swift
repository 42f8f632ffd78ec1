import CRunLoopShims

/// The phases of one pass, each called once from `Loop.iterate`.
///
/// Lock discipline, the same in every phase: decide what to call while holding the loop's
/// lock, release it, then call out. Between collecting and calling, another thread (or an
/// earlier callback) may have removed or invalidated an item, so each item is checked again,
/// under the lock, right before its callback runs.
extension Loop {
  // MARK: Where one pass ends and the next begins

  /// The end of one pass and the start of the next, in one hold of the lock (nothing runs
  /// between them): the run ends if a stop was requested or, when `checkingEmpty`, if the
  /// mode has emptied; otherwise the next pass begins, and a wake-up requested before this
  /// point is answered by it. Not `beginning` (a `VirtualLoop.step()`'s one pass), the run
  /// ends `.timedOut` instead. Returns how the run ends, or nil to go on.
  func endOrBeginPassLocked(
    _ mode: ModeState, checkingEmpty: Bool, beginning: Bool
  ) -> RunResult? {
    if let last = frames.indices.last, frames[last].stopRequested {
      frames[last].stopRequested = false
      return .stopped
    }
    if checkingEmpty && isEmptyLocked(mode) { return .finished }
    guard beginning else { return .timedOut }
    clearWakeRequestLocked()
    counters.passes += 1
    return nil
  }

  // MARK: Observers

  func notifyObservers(_ activity: Activity, in mode: ModeState) {
    guard mode.observedActivities.load(ordering: .relaxed) & activity.rawValue != 0 else {
      traceSink(mode.mode)?.record(.activity(activity))
      return
    }
    // Kept for the observers' callouts only when there are any: holding it costs.
    let sink = traceSink(mode.mode)
    sink?.record(.activity(activity))
    let observers = lock.withLock { mode.observers(of: activity) }
    let watched = watchingStalls()
    for observer in observers {
      // Locked by hand: a closure handed out of the generic `withLock` is re-abstracted, which
      // allocates a thunk on every call.
      lock.lock()
      let handler = takeObserverHandlerLocked(observer, in: mode)
      lock.unlock()
      guard let handler else { continue }
      let began = sink?.now
      if watched {
        calloutBoard.begin(.observer(activity), label: nil, mode: mode.mode, depth: frames.count)
      }
      handler(observer, activity)
      if watched { calloutBoard.end() }
      sink?.record(.observer(activity, order: observer.order), since: began)
      lock.withLock { observer.isFiring = false }
      if !observer.repeats { observer.invalidate() }
    }
  }

  /// The observer's handler if it may be told now, marked as firing; nil otherwise.
  private func takeObserverHandlerLocked(
    _ observer: LoopObserver, in mode: ModeState
  ) -> LoopObserver.Handler? {
    // CF's rule: an observer is never told again while its own callback is still running.
    guard !observer.isFiring, observer.modes.contains(where: { $0 === mode }),
      let handler = observer.handler
    else { return nil }
    observer.isFiring = true
    return handler
  }

  // MARK: Blocks

  /// Runs every queued block that applies to this mode, in queue order. Blocks queued while
  /// these run wait for the next drain, so a block that queues a block cannot recurse.
  func performBlocks(in mode: ModeState) {
    // Nothing queued, the common case of a drain: no lock. (Only this thread adds to `blocks`
    // and `deferredBlocks`, so it may read them without the lock.)
    if blocks.isEmpty && deferredBlocks.isEmpty && !posted.mayHaveWaiting { return }
    // A nested run in one of these blocks drains into a batch of its own.
    let batch = spareBatch ?? DrainBatch()
    spareBatch = nil
    // Every block posted before the drain began is taken: a post claimed and not yet written
    // is waited for (see `PostQueue`).
    let claimed = posted.claimed
    posted.waitForWrites(before: claimed)
    var older: [QueuedBlock] = []
    lock.lock()
    // Blocks put back ahead of the queue (jobs held by a nested run), rarely any.
    if !blocks.isEmpty { swap(&blocks, &older) }
    batch.reserve(posted.claims(before: claimed))
    posted.take(into: batch, before: claimed)
    counters.blocksRun += UInt64(older.count + batch.count)  // blocks kept are taken off again
    let isCommon = mode.isCommon
    let anyDeferred = !deferredBlocks.isEmpty
    lock.unlock()
    let target = QueuedBlock.Target(mode.mode, isCommon: isCommon)
    // The common drain runs everything it took; otherwise the blocks are sorted out first,
    // and those that run now go back into the batch.
    if !(older.isEmpty && !anyDeferred && jobs.depth == 0 && batch.allApply(to: target)) {
      var taken = older + batch.moveToArray()
      sortOut(&taken, for: target, lookingAtDeferred: anyDeferred)
      batch.append(contentsOf: consume taken)
    }
    if batch.count > 0 {
      let sink = traceSink(mode.mode)
      let began = sink?.now
      let count = batch.count
      batch.runAll(on: self, in: mode.mode)
      sink?.record(.blocks(count: count), since: began)
    }
    // Keeps a modest buffer for the next drain; a huge one (after a flood) is let go.
    if batch.capacity <= Loop.drainBufferLimit { spareBatch = batch }
  }

  /// What a drain does when it cannot simply run everything it took: deferred blocks that
  /// now apply go first, blocks for other modes are set aside, executor jobs are held while
  /// a job runs. `taken` is left with the blocks to run now, in order.
  private func sortOut(
    _ taken: inout [QueuedBlock], for target: QueuedBlock.Target, lookingAtDeferred: Bool
  ) {
    if lookingAtDeferred {
      // Blocks kept for other modes are older than anything just taken: those that apply
      // here now run first. Looked at only when the target changed since a drain last found
      // none (only this thread adds to them, so they are still there).
      let due = lock.withLock { () -> [QueuedBlock] in
        guard deferredBlocksSkip != target else { return [] }
        let due = takeDeferredBlocksLocked(for: target)
        counters.blocksRun += UInt64(due.count)
        return due
      }
      if !due.isEmpty { taken = due + taken }
    }
    if !taken.allSatisfy({ $0.applies(to: target) }) {
      // Blocks for other modes wait in `deferredBlocks`, in order, behind those already
      // there: later drains of this mode pass over them without copying them back.
      let kept = taken.filter { !$0.applies(to: target) }
      taken.removeAll { !$0.applies(to: target) }
      lock.withLock {
        if deferredBlocks.isEmpty { deferredBlocksSkip = target }
        deferredBlocks += kept
        blocksSetAside += UInt64(kept.count)
        counters.blocksRun -= UInt64(kept.count)
      }
    }
    let held = holdJobsIfInsideJob(&taken)
    if held > 0 { lock.withLock { counters.blocksRun -= UInt64(held) } }
  }

  /// Takes the deferred blocks that apply to `target` out of `deferredBlocks`, in order; the
  /// others stay, and none of them applies to `target` any more.
  private func takeDeferredBlocksLocked(for target: QueuedBlock.Target) -> [QueuedBlock] {
    deferredBlocksSkip = target
    guard deferredBlocks.contains(where: { $0.applies(to: target) }) else { return [] }
    let due = deferredBlocks.filter { $0.applies(to: target) }
    deferredBlocks.removeAll { $0.applies(to: target) }
    return due
  }

  // MARK: Manual sources

  /// Whether a source of `mode` may have been signalled since the mode's sources were last
  /// looked at (the signal count moved since a look found them quiet): what a wait that no
  /// signal wakes by itself (an embedding between passes, `VirtualLoop.runUntil`) checks
  /// before it sleeps. Sequentially consistent, against `countSignal`, which adds to the
  /// count and then reads whether to wake.
  func hasUnseenSignalsLocked(in mode: ModeState) -> Bool {
    !mode.manualSources.isEmpty
      && mode.quietManualSignals != manualSignals.load(ordering: .sequentiallyConsistent)
  }

  /// Performs signalled manual sources by order, then by signal time. Returns whether any ran.
  /// Looks only at what was signalled (the inbox, then the mode's ready sources), never at the
  /// mode's other sources.
  func performManualSources(in mode: ModeState, onlyOne: Bool) -> Bool {
    // Nothing signalled since this mode last looked and found nothing: looking again would
    // take the lock for nothing (a resident thread's keep-alive source made every pass do so).
    // Sequentially consistent: see `wakeUp`, whose skipped wake-up this look answers.
    let signals = manualSignals.load(ordering: .sequentiallyConsistent)
    if mode.quietManualSignals == signals { return false }
    // Taken before the lock (it takes the lock itself when a tracer is attached).
    let sink = traceSink(mode.mode)
    let watched = watchingStalls()
    lock.lock()
    mode.manualLooks += 1
    takeSignalInboxLocked()
    // The sources ready now are this phase's; any that join them during it wait.
    let cutoff = readyStamps
    var next = takeReadySourceLocked(in: mode, stampedBy: cutoff)
    guard next != nil else {
      mode.quietManualSignals = signals
      lock.unlock()
      return false
    }
    mode.quietManualSignals = nil
    var handled = false
    while let (source, perform) = next {
      counters.sourcesHandled += 1
      lock.unlock()
      let began = sink?.now
      if watched {
        calloutBoard.begin(.manualSource, label: source.label, mode: mode.mode, depth: frames.count)
      }
      perform()
      if watched { calloutBoard.end() }
      sink?.record(.manualSource(source.traceName), since: began)
      handled = true
      if onlyOne { break }
      // One source at a time, so a nested run in a callout finds the rest still ready (and
      // may perform them), as CF's nested runs find them still signalled.
      lock.lock()
      next = takeReadySourceLocked(in: mode, stampedBy: cutoff)
      if next == nil { lock.unlock() }
    }
    // Every source signalled when the look began has been performed, and none was signalled
    // since (each signal moves the count): the mode is quiet again, and the next look (or an
    // embedding's check between passes) need not take the lock to find that out. (A run that
    // stops after one source may have left others ready: the next look takes them.)
    if !onlyOne && manualSignals.load(ordering: .acquiring) == signals {
      mode.quietManualSignals = signals
    }
    return handled
  }
}
