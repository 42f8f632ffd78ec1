import CRunLoopShims
import Glibc

/// The process-wide side of signal sources: which handler slot watches which signal, and when
/// the signal's disposition is installed and put back. The handler itself is C (CShims/signals.c) and
/// only reads the slots; every decision is made here, under one lock, outside any handler.
/// The first watch also starts the catcher, one thread of the library's own that leaves the
/// watched signals unblocked, so they are delivered even when every other thread blocks them;
/// the last unwatch ends it.
///
/// libuv keeps the same split (`uv__signal_handler` writes to each watching loop's pipe;
/// `uv_signal_start` decides under a lock). The difference is the wake-up: one eventfd per
/// source instead of one pipe per loop, so a delivery needs no message parsing and a burst
/// of deliveries costs the loop one read.
enum SignalRegistry {
  private struct State {
    var freeSlots: [Int32] = (0..<Int32(CRL_SIGNAL_SLOTS)).reversed()
    /// Slots in use per signal; the disposition is ours while this is above zero.
    var watchers: [Int32: Int] = [:]
  }

  // A `Lock` is not `Sendable` (a `ManagedBuffer`), but its mutex is what makes it safe to share.
  nonisolated(unsafe) private static let lock = Lock.make()
  nonisolated(unsafe) private static var state = State()  // guarded by `lock`

  /// Starts counting `signal` into a free slot that writes to `eventFD`, installing the
  /// handler if this is the signal's first watcher. Returns the slot.
  static func watch(_ signal: Int32, eventFD: Int32) throws(LoopError) -> Int32 {
    try lock.withLock { () throws(LoopError) -> Int32 in
      guard let slot = state.freeSlots.popLast() else {
        throw .invalidArgument(
          name: "signal source for", value: SignalSource.name(of: signal),
          reason: "\(CRL_SIGNAL_SLOTS) signal sources are in a mode already, the most a "
            + "process can have at once; invalidate or remove one first")
      }
      // The slot first: a delivery that finds the handler installed also finds the slot.
      crl_signal_slot_set(slot, signal, eventFD)
      if state.watchers[signal, default: 0] == 0 {
        do throws(LoopError) {
          try startCatcherLocked()
          try Syscall.retryingEINTR("sigaction", on: SignalSource.name(of: signal)) {
            crl_signal_install(signal)
          }
        } catch {
          _ = crl_signal_slot_clear(slot)
          state.freeSlots.append(slot)
          crl_signal_catcher_end_if_idle()
          throw error
        }
        crl_signal_catcher_watch(signal, 1)
      }
      state.watchers[signal, default: 0] += 1
      return slot
    }
  }

  /// Stops counting into `slot`; restores the disposition found by the first watcher when
  /// this was the last one. Returns the deliveries the slot counted that nobody took. When
  /// it returns, no handler writes to the slot's eventfd any more, so it may be closed.
  static func unwatch(_ signal: Int32, slot: Int32) -> UInt64 {
    lock.withLock {
      let remaining = state.watchers[signal, default: 1] - 1
      state.watchers[signal] = remaining == 0 ? nil : remaining
      // Restored before the slot is cleared: a delivery in between is still counted, and one
      // after takes the old disposition, as it should with no source left.
      if remaining == 0 {
        // The catcher blocks it first (and has, when this returns): restored while the
        // catcher still accepted it, a signal every other thread blocks would take its
        // default action there.
        crl_signal_catcher_watch(signal, 0)
        _ = crl_signal_restore(signal)
      }
      let leftover = crl_signal_slot_clear(slot)
      state.freeSlots.append(slot)
      return leftover
    }
  }

  /// Starts the catcher thread if it is not running (see CShims/signals.c): without it,
  /// a signal that every thread blocks would stay pending for good.
  private static func startCatcherLocked() throws(LoopError) {
    // Idempotent, and after fork() in a child it starts the child's own.
    let result = crl_signal_catcher_start()
    guard result == 0 else {
      throw .system(
        SystemError(
          operation: "pthread_create", subject: "the signal catcher thread", errno: result))
    }
  }

  /// The deliveries counted in `slot` since the last take.
  static func take(_ slot: Int32) -> UInt64 { crl_signal_slot_take(slot) }
}
