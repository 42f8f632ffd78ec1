import Synchronization

/// A process-wide counter that orders events across threads without a lock: signal order
/// of manual sources, the add order of observers and timers used to break ties.
enum SignalClock {
  private static let counter = Atomic<UInt64>(0)

  static func next() -> UInt64 {
    counter.wrappingAdd(1, ordering: .relaxed).newValue
  }
}
