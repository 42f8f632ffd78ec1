/// Changing a repeating timer's interval, as `uv_timer_set_repeat` does (CF has no setter:
/// `CFRunLoopTimerGetInterval` only reads it).
extension LoopTimer {
  /// The repeat interval, or `nil` for a one-shot timer. Safe from any thread.
  ///
  /// Settable on a repeating timer: the fire date already due is kept, and the grid restarts
  /// there, each later fire `interval` after the one before — a heartbeat changed on reload
  /// needs no new timer. Set during the timer's own callout, the next fire is still on the old
  /// grid (as in libuv) unless the callout also set `fireDate`. Setting it on an invalid timer
  /// does nothing, as setting `fireDate` does.
  ///
  /// The setter traps where `setInterval(_:)` throws (a one-shot timer made repeating, a
  /// repeating timer made one-shot, an interval not greater than zero), with the message of
  /// the error; call `setInterval(_:)` to handle it instead.
  public var interval: Duration? {
    get { binding.lock.withLock { storedInterval } }
    set {
      do throws(LoopError) {
        try setInterval(newValue)
      } catch {
        fatalError(
          "RunLoopKit: LoopTimer.interval = \(newValue.map { "\($0)" } ?? "nil"): \(error)")
      }
    }
  }

  /// Sets the repeat interval of a repeating timer; see `interval`.
  ///
  /// - Throws: `LoopError.invalidArgument` for an interval not greater than zero, for a
  ///   one-shot timer (it cannot become repeating: make a repeating timer), and for `nil` on
  ///   a repeating timer (it cannot become one-shot: invalidate it after its next fire).
  public func setInterval(_ newInterval: Duration?) throws(LoopError) {
    if let newInterval, newInterval <= .zero {
      throw LoopTimer.invalid("timer interval", "\(newInterval)", LoopTimer.intervalRule)
    }
    guard repeats else {
      guard let newInterval else { return }
      throw LoopTimer.invalid(
        "timer interval", "\(newInterval)",
        "a one-shot timer cannot become repeating; make a repeating timer instead")
    }
    guard let newInterval else {
      throw LoopTimer.invalid(
        "timer interval", "nil",
        "a repeating timer cannot become one-shot; invalidate it after its next fire instead")
    }
    changeSchedule { now in
      guard let old = storedInterval, old != newInterval else { return }
      // In its own callout (`isFiring`, under the loop's lock, which a bound timer's change
      // holds) the date just served is still stored: the next fire is pinned on the old grid,
      // unless the callout set one itself.
      if isFiring && !fireDateSet {
        storedFireDate = LoopTimer.nextFireDate(
          after: storedFireDate, current: storedFireDate, interval: old, now: now)
        fireDateSet = true
      }
      storedInterval = newInterval
    }
  }
}
