/// Told about the activities of a loop (entry, before timers, before sources, before and after
/// waiting, exit). Mirrors `CFRunLoopObserver`: same activity values, `repeats` and `order`;
/// observers with equal order are told in the order they were added. An observer that does
/// not repeat is told once and is then invalidated.
///
/// Like CF, observers never keep a mode alive, and an observer is not told again while its
/// own callback is still running (a nested run inside the callback skips it).
public final class LoopObserver: @unchecked Sendable {  // state under the loop lock / binding.lock
  public let activities: Loop.Activity
  public let repeats: Bool
  public let order: Int
  typealias Handler = (LoopObserver, Loop.Activity) -> Void
  let binding = ItemBinding(kind: "LoopObserver")
  /// Guarded by `binding.lock`; nil once the observer is invalid (a one-shot observer that
  /// was told included), as CFRunLoopObserverInvalidate releases the observer's context.
  private var storedHandler: Handler?
  /// Guarded by the owner loop's lock.
  var modes: [ModeState] = []
  /// Guarded by the owner loop's lock.
  var isFiring = false

  public init(
    activities: Loop.Activity,
    repeats: Bool = true,
    order: Int = 0,
    handler: sending @escaping (LoopObserver, Loop.Activity) -> Void
  ) {
    self.activities = activities
    self.repeats = repeats
    self.order = order
    self.storedHandler = handler
  }

  public var isValid: Bool { binding.isValid }

  /// Removes the observer from every mode; it is never told anything again. Its handler, and
  /// whatever the handler captured, is released once every lock is let go.
  public func invalidate() {
    invalidateReleasing { storedHandler.take() }
  }

  /// The handler while the observer is valid, nil after it was invalidated.
  var handler: Handler? { binding.whileValid { storedHandler } }
}
