import Synchronization

/// Places in the library where a test can hold one thread, to force an interleaving that
/// timing alone reaches once in thousands of runs (a timer invalidated between its two lock
/// holds while its loop's thread exits, say). A race is tested by forcing it here first, then
/// by a stress test without forcing.
///
/// Only debug builds (the tests') contain the mechanism. In a release build `reach` is empty
/// and inlined away, so the library's paths carry no test code.
enum TestPausePoint: Hashable, Sendable {
  /// `LoopTimer.invalidate()`: the timer is marked invalid and its stripe lock let go, and its
  /// loop has not detached it yet. Keyed by the timer.
  case timerInvalidatedNotYetDetached
  /// `Loop.fireTimers`: the timer was taken out of its heaps for its callout, which has not
  /// started. Keyed by the timer.
  case timerAboutToFire
  /// `Loop.send(_:)`: a poster decided under the loop's lock to write the wake-up eventfd,
  /// released the lock, and has not written yet. Keyed by the loop.
  case wakeWriteDecided
  /// `Loop.PostQueue.push`: a poster claimed its slot and has not written its block yet (the
  /// loop's drains stop at that slot). Keyed by the loop's `posted` queue.
  case postClaimed
  /// `Loop.PostQueue.waitForWrites`: a drain found a slot claimed before it began and not yet
  /// written, and waits for it. Keyed by the loop's `posted` queue.
  case drainWaitsForClaim
  /// A child-process source's handler reaped the child and has not invalidated the source
  /// yet. Keyed by the source's `DescriptorSource` (`ChildProcessSource.source`).
  case childReaped
  /// A signal source's handler was called for its eventfd and has not taken the count yet.
  /// Keyed by the source's `DescriptorSource` (`SignalSource.source`).
  case signalDeliveryStarting
  /// `ManualSource.signal()` set the flag and handed the source to its loop, and has let go of
  /// the source's lock. Keyed by the source.
  case signalHandedOver
  /// A wait has decided to sleep and holds the loop's lock, before it says so (`asleep`).
  /// Keyed by the loop.
  case sleepDecided

  /// Runs the action armed for `point` and `object`, if any (once), on the calling thread.
  @inline(__always)
  static func reach(_ point: TestPausePoint, by object: AnyObject) {
    #if DEBUG
      Registry.shared.reach(point, ObjectIdentifier(object))
    #endif
  }

  #if DEBUG
    /// Makes the next thread that reaches `point` for `object` run `action` there, once. The
    /// action usually signals that the thread arrived and waits until the test lets it go.
    static func arm(
      _ point: TestPausePoint, for object: AnyObject, _ action: @escaping @Sendable () -> Void
    ) {
      Registry.shared.arm(point, ObjectIdentifier(object), action)
    }

    /// Removes what `arm` set for `point` and `object` if no thread has reached it, so a test
    /// that failed early leaves nothing armed for a later object at the same address.
    static func disarm(_ point: TestPausePoint, for object: AnyObject) {
      Registry.shared.disarm(point, ObjectIdentifier(object))
    }

    /// The armed actions. A count read without the lock keeps unarmed points to one atomic
    /// load, so the paths tests time are barely slowed in debug builds.
    private final class Registry: @unchecked Sendable {  // `actions` is guarded by `lock`
      static let shared = Registry()

      private struct Key: Hashable {
        let point: TestPausePoint
        let object: ObjectIdentifier
      }

      private let lock = Lock.make()
      private var actions: [Key: @Sendable () -> Void] = [:]
      private let armed = Atomic<Int>(0)

      func arm(
        _ point: TestPausePoint, _ object: ObjectIdentifier,
        _ action: @escaping @Sendable () -> Void
      ) {
        lock.withLock {
          if actions.updateValue(action, forKey: Key(point: point, object: object)) == nil {
            armed.add(1, ordering: .releasing)
          }
        }
      }

      func disarm(_ point: TestPausePoint, _ object: ObjectIdentifier) {
        lock.withLock {
          if actions.removeValue(forKey: Key(point: point, object: object)) != nil {
            armed.subtract(1, ordering: .releasing)
          }
        }
      }

      func reach(_ point: TestPausePoint, _ object: ObjectIdentifier) {
        guard armed.load(ordering: .acquiring) > 0 else { return }
        let action = lock.withLock { () -> (@Sendable () -> Void)? in
          guard let action = actions.removeValue(forKey: Key(point: point, object: object))
          else { return nil }
          armed.subtract(1, ordering: .releasing)
          return action
        }
        action?()
      }
    }
  #endif
}
