/// Which loop an item (source, observer) belongs to, and whether it is still valid: a
/// `BindingState` and the mutex that guards it, in one object (`MutexBuffer`: an item's lock
/// is taken on every signal and delivery, and a block of its own would be one more cache miss
/// each time once a loop holds many items). That lock is a leaf lock: nothing else is ever
/// acquired while it is held (but a loop's `SignalInbox` lock, itself a leaf, by a manual
/// source's signal), so taking it inside the loop's lock can never deadlock.
///
/// Shared between threads by the items that own it (each `@unchecked Sendable`): every field
/// but the two constants is read and written with the mutex held.
final class ItemBinding: MutexBuffer<ItemBinding.Fields> {
  /// The kind of item, for error messages. One byte: as a `String` it took sixteen, which put
  /// the mutex 40 bytes after the state instead of 16, on another cache line in half the
  /// objects instead of a quarter (a signal touches both; with a million sources, each line
  /// is a miss).
  enum Kind: String {
    case manualSource = "ManualSource"
    case descriptorSource = "DescriptorSource"
    case observer = "LoopObserver"
  }

  struct Fields {
    var state = BindingState()
    let kind: Kind
    /// The item's closures were given through `IsolatedLoop`: they let go of what they
    /// captured on the loop's thread only (see `Loop.releaseOnOwnThread`).
    let releasesOnLoopThread: Bool
  }

  static func make(kind: Kind, releasesOnLoopThread: Bool = false) -> ItemBinding {
    let fields = Fields(kind: kind, releasesOnLoopThread: releasesOnLoopThread)
    return unsafeDowncast(makeBuffer(header: fields), to: ItemBinding.self)
  }

  /// The lock that guards the binding: the binding itself.
  @inline(__always) var lock: ItemBinding { self }

  var kind: String { withUnsafeMutablePointerToHeader { $0.pointee.kind.rawValue } }
  var releasesOnLoopThread: Bool {
    withUnsafeMutablePointerToHeader { $0.pointee.releasesOnLoopThread }
  }

  /// The state, guarded by the lock. Through the header's pointer: no exclusivity check on
  /// the path of every delivery (the lock is what keeps accesses apart).
  @inline(__always)
  private func withState<T, E: Error>(
    _ body: (inout BindingState) throws(E) -> T
  ) throws(E) -> T {
    try withUnsafeMutablePointerToHeader { (header) throws(E) -> T in
      try body(&header.pointee.state)
    }
  }

  var isValid: Bool { lock.withLock { withState { $0.isValid } } }

  /// `isValid` for callers that already hold `lock`.
  var isValidUnlocked: Bool { withState { $0.isValid } }

  var owner: Loop? { lock.withLock { withState { $0.loop } } }

  /// `owner` for callers that already hold `lock`.
  var ownerUnlocked: Loop? { withState { $0.loop } }

  /// `BindingState.bind(to:kind:)` under the lock.
  @discardableResult
  func bind(to target: Loop) throws(LoopError) -> Bool {
    let kind = self.kind
    return try lock.withLock { () throws(LoopError) -> Bool in
      try withState { (state) throws(LoopError) -> Bool in try state.bind(to: target, kind: kind) }
    }
  }

  /// Undoes a binding made by an add that then failed, so the item is free again.
  func unbind() { lock.withLock { withState { $0.unbind() } } }

  /// Marks the item invalid; returns the loop it must be removed from, if any, the first time.
  func invalidate() -> (wasValid: Bool, loop: Loop?) {
    lock.withLock { withState { $0.invalidate() } }
  }
}
