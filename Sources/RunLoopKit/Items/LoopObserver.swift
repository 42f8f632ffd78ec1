/// Told about the activities of a loop (entry, before timers, before sources, before and after
/// waiting, exit). Mirrors `CFRunLoopObserver`: same activity values, `repeats` and `order`;
/// observers with equal order are told in the order they were added. An observer that does
/// not repeat is told once and is then invalidated.
///
/// Like CF, observers never keep a mode alive, and an observer is not told again while its
/// own callback is still running (a nested run inside the callback skips it).
public final class LoopObserver: @unchecked Sendable {  // state under the loop lock / binding.lock
  /// The activities the observer is told about (CF's activities mask).
  public let activities: Loop.Activity
  /// Whether the observer is told every time; one that does not repeat is told once, then
  /// invalidated.
  public let repeats: Bool
  /// Lower orders are told first, equal orders in the order they were added
  /// (`CFRunLoopObserverGetOrder`).
  public let order: Int
  typealias Handler = (LoopObserver, Loop.Activity) -> Void
  let binding: ItemBinding
  /// Guarded by `binding.lock`; nil once the observer is invalid (a one-shot observer that
  /// was told included), as CFRunLoopObserverInvalidate releases the observer's context.
  private var storedHandler: Handler?
  /// Guarded by the owner loop's lock.
  var modes: [ModeState] = []
  /// Guarded by the owner loop's lock.
  var isFiring = false

  /// Creates an observer that calls `handler` on the loop's thread with each of `activities` as
  /// it happens. Mirrors `CFRunLoopObserverCreateWithHandler`; add it to a loop to have it told.
  public convenience init(
    activities: Loop.Activity,
    repeats: Bool = true,
    order: Int = 0,
    handler: sending @escaping (LoopObserver, Loop.Activity) -> Void
  ) {
    self.init(
      activities: activities, repeats: repeats, order: order, isolatedHandler: handler,
      releasesOnLoopThread: false)
  }

  /// The public initialiser with a plain handler: that one has the `sending` proof,
  /// `IsolatedLoop.addObserver` the thread check.
  init(
    activities: Loop.Activity, repeats: Bool, order: Int,
    isolatedHandler handler: @escaping Handler, releasesOnLoopThread: Bool
  ) {
    self.binding = ItemBinding.make(
      kind: .observer, releasesOnLoopThread: releasesOnLoopThread)
    self.activities = activities
    self.repeats = repeats
    self.order = order
    self.storedHandler = handler
  }

  /// False once the observer was invalidated (a one-shot observer once told) or its loop torn
  /// down. Mirrors `CFRunLoopObserverIsValid`.
  public var isValid: Bool { binding.isValid }

  /// Removes the observer from every mode; it is never told anything again. Its handler, and
  /// whatever the handler captured, is released once every lock is let go.
  public func invalidate() {
    invalidateReleasing { storedHandler.take() }
  }

  /// The handler while the observer is valid, nil after it was invalidated. (Locked by hand,
  /// as `DescriptorSource.handler`: a closure handed through a generic is re-abstracted,
  /// which allocates a thunk on every call.)
  var handler: Handler? {
    binding.lock.lock()
    defer { binding.lock.unlock() }
    return binding.isValidUnlocked ? storedHandler : nil
  }
}
