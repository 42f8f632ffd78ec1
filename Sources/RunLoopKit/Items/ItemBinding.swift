/// Which loop an item (source, timer, observer) belongs to, and whether it is still valid.
///
/// CF binds timers and observers to one run loop for life and quietly ignores attempts to
/// add them to another; RunLoopKit binds every item the same way but throws instead. Every
/// field is guarded by `lock`, which is a leaf lock: nothing else is ever acquired while it is
/// held, so taking it inside the loop's lock can never deadlock.
final class ItemBinding: @unchecked Sendable {  // all fields are guarded by `lock`
  let lock = Lock()
  private weak var loop: Loop?
  /// Set by the first successful bind: once the loop is gone (its thread exited and nothing
  /// holds it), the item must not move to another loop and run on a second thread.
  private var everBound = false
  private var valid = true
  let kind: String

  init(kind: String) { self.kind = kind }

  var isValid: Bool { lock.withLock { valid } }

  /// `isValid` for callers that already hold `lock`.
  var isValidUnlocked: Bool { valid }

  var owner: Loop? { lock.withLock { loop } }

  /// What `read` returns while the item is valid, nil once it was invalidated. `read` runs
  /// with `lock` held, so it may read the item's state guarded by it (its closures).
  func whileValid<T>(_ read: () -> T?) -> T? {
    lock.withLock { valid ? read() : nil }
  }

  /// `owner` for callers that already hold `lock`.
  var ownerUnlocked: Loop? { loop }

  /// Binds to `loop` on first use; refuses another loop or an invalidated item. Returns
  /// whether this call made the binding (so a failed first add can undo it).
  @discardableResult
  func bind(to target: Loop) throws(LoopError) -> Bool {
    try lock.withLock { () throws(LoopError) -> Bool in
      guard valid else { throw .invalidated(item: kind) }
      if let current = loop {
        guard current === target else { throw .boundToAnotherLoop(item: kind) }
        return false
      }
      guard !everBound else { throw .boundToAnotherLoop(item: kind) }
      loop = target
      everBound = true
      return true
    }
  }

  /// Undoes a binding made by an add that then failed, so the item is free again.
  func unbind() {
    lock.withLock {
      loop = nil
      everBound = false
    }
  }

  /// Marks the item invalid; returns the loop it must be removed from, if any, the first time.
  func invalidate() -> (wasValid: Bool, loop: Loop?) {
    lock.withLock {
      let wasValid = valid
      valid = false
      return (wasValid, loop)
    }
  }
}
