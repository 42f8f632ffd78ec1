/// Stopping a run and waking a loop from any thread (CFRunLoopStop, CFRunLoopWakeUp), and
/// what a run is doing right now.
extension Loop {
  /// Ends the innermost active `run` (it returns `.stopped`); wakes the loop if it sleeps.
  /// A stop while the loop is not running is dropped, as in CF. Safe from any thread.
  public func stop() {
    let signal = lock.withLock { () -> WakeSignal in
      guard !frames.isEmpty else { return .none }
      frames[frames.count - 1].stopRequested = true
      return requestWakeLocked()
    }
    send(signal)
  }

  /// Ends every active run, innermost first (each returns `.stopped` when control reaches it).
  /// The resident thread uses it to shut down even while its loop is inside nested runs.
  func stopAllRuns() {
    let signal = lock.withLock { () -> WakeSignal in
      guard !frames.isEmpty else { return .none }
      for index in frames.indices { frames[index].stopRequested = true }
      return requestWakeLocked()
    }
    send(signal)
  }

  /// Makes a sleeping loop do one more pass (CFRunLoopWakeUp). If the loop is busy inside a
  /// run, that run's next wait returns at once instead. A wake-up made while no run is active
  /// is dropped, as `CFRunLoopWakeUp`'s is: it does not make a later run return early or skip
  /// its first sleep. Safe from any thread; it takes the loop's lock only to wake a loop that
  /// sleeps, so calling it flat out at a busy loop does not contend with the loop's passes.
  public func wakeUp() {
    // A wake-up asked for and not answered yet: the loop looks again before it sleeps, so
    // this one has nothing to add, and a thread signalling flat out does not contend for the
    // loop's lock with every call. A read-modify-write (true stays true), sequentially
    // consistent against the clearing (an exchange: `clearWakeRequestLocked`, `sortOutWake`),
    // which a pass follows with its look at the signal count: either this finds the flag
    // cleared, and takes the lock, or the clearing reads what this wrote, and so the loop
    // sees everything the caller did before calling, as the lock would have made it see.
    if wakePending.compareExchange(
      expected: true, desired: true, ordering: .sequentiallyConsistent
    ).exchanged {
      return
    }
    // A loop not asleep is told with a flag, without the lock, as a post is (`PostQueue`):
    // its pass clears the flag when it begins (the pass answers what came before it), and
    // its wait reads the flag before it sleeps, once more after it said so (`asleep`). So
    // either this finds `asleep` set and takes the lock to wake the sleep, or the wait finds
    // the flag and does not sleep. A thread signalling a busy loop flat out then never meets
    // the loop's lock, which the loop holds while it takes what was signalled: measured with
    // a million manual sources, the signaller blocked on it (`__lll_lock_wait`) at every
    // pass, and the loop woke it again on its way out (`__lll_lock_wake`).
    // A loop found asleep at once is woken as before, with no flag.
    if asleep.load(ordering: .sequentiallyConsistent) {
      send(lock.withLock { requestWakeLocked() })
      return
    }
    // A read-modify-write even when the flag is set already, for the reason given above: the
    // clearing then reads what this wrote (a plain load that found it set would leave the
    // caller's earlier writes unordered with the pass that answers).
    if wakeAsked.exchange(true, ordering: .sequentiallyConsistent)
      || !asleep.load(ordering: .sequentiallyConsistent)
    {
      return
    }
    // Found asleep only after the flag was set: the flag is taken back under the lock, and
    // the sleep woken, unless the wait (or a pass) read the flag first and so answered it.
    // Left set, it would answer a later wait that nobody asked to end.
    send(
      lock.withLock {
        wakeAsked.exchange(false, ordering: .sequentiallyConsistent) ? requestWakeLocked() : .none
      })
  }

  /// True while the loop's thread is blocked in the kernel waiting for something to happen;
  /// false inside every callback.
  public var isWaiting: Bool { lock.withLock { sleeping } }

  /// The mode of the innermost active run, or nil when the loop is not running.
  public var currentMode: Mode? { lock.withLock { frames.last?.mode } }
}
