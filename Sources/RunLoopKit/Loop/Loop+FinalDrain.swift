/// A loop's last work: what it accepted and has not done yet, done on its thread as the thread
/// exits (or a `ResidentThread` stops), before teardown. CF frees a dying loop's blocks unrun
/// and forgets its signalled sources; here whatever a call accepted is done, or the call was
/// refused — never accepted and then dropped.
extension Loop {
  /// Runs, on the loop's thread, every piece of work the loop accepted, round after round
  /// until a round finds none, including what the work itself adds:
  /// - blocks posted with `perform` (whatever their mode) and executor jobs, in the order
  ///   queued;
  /// - manual sources signalled and still in a mode (any mode), performed by order, then by
  ///   signal time, as a pass performs them, each at most once in the whole drain (a source
  ///   signalled again after its perform here, by itself or by other work, is not performed
  ///   again: its signal is ignored with the rest once the drain ends);
  /// - messages sent to ports in a mode (any mode), handed to their handlers, ports by order.
  ///
  /// Ports refuse sends from the start of the drain (`LoopError.loopTornDown`), so every
  /// message one accepted is delivered here; a port in no mode keeps what it holds for
  /// `LoopPort.invalidate()` to hand back. Once a round finds nothing, later posts throw and
  /// later executor jobs trap; a signal made after that is ignored, as a signal to an
  /// invalid source is (the teardown that follows invalidates the source). The callouts run
  /// outside any run (`currentMode` is nil), as the blocks always did here; a port handler
  /// that resumes a task which then hops back to this loop's executor after the drain ends
  /// traps, naming the loop, where before the drain left the task suspended for good.
  func runAcceptedWorkBeforeExit() {
    // Once only: a resident thread drains when it stops and its thread's exit would again,
    // when every queue is closed and any signal since is one to ignore.
    guard !finalDrainDone else { return }
    defer { finalDrainDone = true }
    refusePortSendsBeforeExit()
    // A source is performed once per drain: one that signals itself again from its perform
    // (a pump) would otherwise keep the drain, and the thread's exit, going for ever.
    var performedSources = Set<ObjectIdentifier>()
    while true {
      endSleepsBeforeExit()
      var performed = performSignalledSourcesBeforeExit(skipping: &performedSources)
      let delivered = deliverPortMessagesBeforeExit()
      // `performAsSource` blocks whose source was performed already this drain (or never
      // signalled in time): run here, in the order queued. That queue closes last, below.
      performed = sourcePerforms.runAllBeforeExit() || performed
      // The queue closes only in a round that found nothing else to do: a source or a port
      // handler of this round may have posted, or signalled a source for the next round.
      let batch = takeQueuedBlocksOrClose(mayClose: !performed && !delivered)
      if batch.isEmpty {
        if performed || delivered { continue }
        // The block queue is closed; `performAsSource` closes now too, unless a block came
        // in meanwhile, which the next round runs.
        if sourcePerforms.closeIfEmpty() { return }
        continue
      }
      for queued in batch { queued.run(on: self) }
    }
  }

  /// Invalidates every `loop.sleep` timer still waiting in a mode: each sleep then resumes
  /// its task throwing `LoopError.loopTornDown`, and a task that runs on this loop (an actor
  /// pinned to it) is queued here, before the queue closes, instead of trapping afterwards.
  private func endSleepsBeforeExit() {
    var sleeps: [LoopTimer] = []
    lock.withLock {
      for mode in modeStates.values {
        mode.timers.forEachTimer { timer in
          if timer.endsSleep { sleeps.append(timer) }
        }
      }
    }
    // Outside the lock: invalidating releases the handler, which resumes the task, which
    // may queue a job here. A common-mode timer is in several heaps; invalidating it again
    // does nothing.
    for timer in sleeps { timer.invalidate() }
  }

  /// Performs every manual source that is signalled and in one of the loop's modes, by order
  /// then signal time (a source in several modes is one source), except those in `performed`,
  /// which it adds to. Returns whether any ran.
  private func performSignalledSourcesBeforeExit(
    skipping performed: inout Set<ObjectIdentifier>
  ) -> Bool {
    let signalled = lock.withLock { [performed] () -> [(source: ManualSource, sequence: UInt64)] in
      var seen = performed
      var found: [(source: ManualSource, sequence: UInt64)] = []
      for mode in modeStates.values {
        mode.manualSources.visitAll { source in
          let key = source.signalKey
          guard key.signalled, seen.insert(ObjectIdentifier(source)).inserted else { return }
          found.append((source, key.sequence))
        }
      }
      return found.sorted { ($0.source.order, $0.sequence) < ($1.source.order, $1.sequence) }
    }
    var ran = false
    for (source, _) in signalled {
      performed.insert(ObjectIdentifier(source))
      let perform = lock.withLock { () -> (() -> Void)? in
        // An earlier callout may have removed or invalidated it.
        guard source.isInAnyModeLocked, let perform = takeSignalLocked(source) else { return nil }
        counters.sourcesHandled += 1
        return perform
      }
      guard let perform else { continue }
      perform()
      ran = true
    }
    return ran
  }

  /// The ports in one of the loop's modes, each once, by order.
  private func scheduledPortsLocked() -> [DescriptorSource] {
    var seen = Set<ObjectIdentifier>()
    var ports: [DescriptorSource] = []
    for mode in modeStates.values {
      for (_, source) in mode.descriptors.entries where source.messages != nil {
        if seen.insert(ObjectIdentifier(source)).inserted { ports.append(source) }
      }
    }
    return ports.sorted { $0.order < $1.order }
  }

  /// From now on the loop's ports refuse sends: each message one accepted is delivered by
  /// this drain, or stays in a port that is in no mode.
  private func refusePortSendsBeforeExit() {
    let ports = lock.withLock { scheduledPortsLocked() }
    let refusal = LoopError.loopTornDown(thread: threadDescription)
    for port in ports { port.messages?.refuse(refusal) }
  }

  /// Hands the messages each port in a mode holds to its handler. Returns whether any did.
  private func deliverPortMessagesBeforeExit() -> Bool {
    let ports = lock.withLock { scheduledPortsLocked() }
    var delivered = false
    for port in ports where port.messages?.hasPending == true {
      guard let handler = lock.withLock({ port.isInAnyModeLocked ? port.handler : nil }) else {
        continue
      }
      handler(port, .readable)
      delivered = true
    }
    return delivered
  }
}

/// What a loop's final drain asks of a port's queue (`Loop.runAcceptedWorkBeforeExit`).
protocol AcceptedMessages: AnyObject, Sendable {
  /// Refuses later sends with `error`; messages already accepted stay to be delivered.
  func refuse(_ error: LoopError)
  /// Whether messages wait to be delivered.
  var hasPending: Bool { get }
}
