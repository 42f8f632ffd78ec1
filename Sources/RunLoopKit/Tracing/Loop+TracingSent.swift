import CRunLoopShims
import Glibc

/// What other threads send a traced loop — signals and wake-ups — recorded as instants on
/// their own tracks. The hooks sit on paths that already decided to signal or wake: untraced,
/// each costs one relaxed load. Traced, the time is read before the signal or wake-up is
/// published, so the instant never comes after what it caused, and the rest (thread name,
/// the loop's mode, the tracer's lock) waits until it is out, so tracing does not delay it.
extension Loop {
  /// `ManualSource.signal()` set the flag of one of this loop's sources, whose lock it holds:
  /// hands the source to the inbox, then moves the count a pass looks at. Returns the time of
  /// the signal when the loop is traced (read before the source is handed over, so the
  /// instant never comes after the perform).
  ///
  /// The count moves after the append, so a pass that reads the new count finds the source in
  /// the inbox. The count and the embedded check (`signalHandedOver`) are sequentially
  /// consistent, against `idleLocked`, which sets `embeddedIdle` and then reads the count: one
  /// of the two sees the other (on x86 the add is a locked instruction either way, and the
  /// load a plain one).
  @inline(__always)
  func handOverLocked(_ source: ManualSource) -> LoopClock.Instant? {
    let at = tracing.load(ordering: .relaxed) ? now : nil
    signalInbox.append(source)
    manualSignals.add(1, ordering: .sequentiallyConsistent)
    return at
  }

  /// After `handOverLocked`, outside the source's lock: records the signal if traced, and
  /// wakes the loop if it is embedded in a host's loop and asleep between passes (the host
  /// must hear of the signal).
  @inline(__always)
  func signalHandedOver(_ source: ManualSource, tracedAt: LoopClock.Instant?) {
    if let tracedAt { traceSignalSent(source, at: tracedAt) }
    if embeddedIdle.load(ordering: .sequentiallyConsistent) { wakeUp() }
  }

  /// `ManualSource.signal()` marked one of this loop's sources at `at` while it was traced.
  /// From the loop's own thread a signal is part of a callout, recorded already.
  private func traceSignalSent(_ source: ManualSource, at: LoopClock.Instant) {
    guard !isCurrent else { return }
    recordSent(.signalSent(source.traceName), at: at, by: crl_gettid())
  }

  /// `send(_:)` to a traced loop: the time and the sender are read before the wake-up goes
  /// out, everything else after it.
  @inline(never)
  func sendTraced(_ signal: WakeSignal) {
    let (at, sender) = (now, crl_gettid())
    deliver(signal)
    guard !isCurrent else { return }
    recordSent(.wakeUpSent(LoopTracer.WakeUpRoute(signal)), at: at, by: sender)
  }

  /// `sendHoldingLock(_:)` to a traced loop. The tracer's lock comes before this loop's, so
  /// the instant goes to the tracer's inbox, which the woken loop's next record empties.
  @inline(never)
  func sendTracedHoldingLock(_ signal: WakeSignal) {
    let (at, sender) = (now, crl_gettid())
    deliver(signal)
    guard let tracer, !isCurrent else { return }
    tracer.post(
      .wakeUpSent(LoopTracer.WakeUpRoute(signal)), at: at, depth: frames.count,
      mode: frames.last?.mode ?? .default, token: tracerToken, thread: sender
    ) { Loop.senderName(sender) }
  }

  /// Records `kind` as an instant at `at` on the track of `sender` (the calling thread), with
  /// the loop's mode and depth as they are now.
  private func recordSent(_ kind: LoopTracer.Kind, at: LoopClock.Instant, by sender: pid_t) {
    guard let sink = attachedTraceSink(nil) else { return }
    sink.tracer.nameThread(sender) { Loop.senderName(sender) }
    sink.tracer.record(
      kind, from: at, to: at, depth: sink.depth, mode: sink.mode, token: sink.token,
      thread: sender)
  }

  /// The calling thread's name for its track.
  private static func senderName(_ sender: pid_t) -> String {
    trackName(thread: sender, named: ThreadName.of(pthread_self()))
  }
}

extension LoopTracer.WakeUpRoute {
  /// How a wake-up that was sent reached the loop (only called for a signal that is sent).
  init(_ signal: Loop.WakeSignal) {
    self = signal == .futex ? .futex : .eventfd
  }
}
