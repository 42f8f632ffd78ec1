/// Which loop an item (source, observer) belongs to, and whether it is still valid: a
/// `BindingState` and the lock that guards it. That lock is a leaf lock: nothing else is ever
/// acquired while it is held (but a loop's `SignalInbox` lock, itself a leaf, by a manual
/// source's signal), so taking it inside the loop's lock can never deadlock.
final class ItemBinding: @unchecked Sendable {  // all fields are guarded by `lock`
  let lock = Lock()
  /// Guarded by `lock` (so the runtime's exclusivity check, on the path of every delivery,
  /// is left out).
  @exclusivity(unchecked) private var state = BindingState()
  let kind: String
  /// The item's closures were given through `IsolatedLoop`: they let go of what they captured
  /// on the loop's thread only (see `Loop.releaseOnOwnThread`).
  let releasesOnLoopThread: Bool

  init(kind: String, releasesOnLoopThread: Bool = false) {
    self.kind = kind
    self.releasesOnLoopThread = releasesOnLoopThread
  }

  var isValid: Bool { lock.withLock { state.isValid } }

  /// `isValid` for callers that already hold `lock`.
  var isValidUnlocked: Bool { state.isValid }

  var owner: Loop? { lock.withLock { state.loop } }

  /// `owner` for callers that already hold `lock`.
  var ownerUnlocked: Loop? { state.loop }

  /// `BindingState.bind(to:kind:)` under the lock.
  @discardableResult
  func bind(to target: Loop) throws(LoopError) -> Bool {
    try lock.withLock { () throws(LoopError) -> Bool in try state.bind(to: target, kind: kind) }
  }

  /// Undoes a binding made by an add that then failed, so the item is free again.
  func unbind() { lock.withLock { state.unbind() } }

  /// Marks the item invalid; returns the loop it must be removed from, if any, the first time.
  func invalidate() -> (wasValid: Bool, loop: Loop?) { lock.withLock { state.invalidate() } }
}
