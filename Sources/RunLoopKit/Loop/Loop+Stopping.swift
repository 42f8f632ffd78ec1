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
  /// its first sleep. Safe from any thread.
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
    send(lock.withLock { requestWakeLocked() })
  }

  /// True while the loop's thread is blocked in the kernel waiting for something to happen;
  /// false inside every callback.
  public var isWaiting: Bool { lock.withLock { sleeping } }

  /// The mode of the innermost active run, or nil when the loop is not running.
  public var currentMode: Mode? { lock.withLock { frames.last?.mode } }
}
