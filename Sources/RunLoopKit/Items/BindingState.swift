/// The rules binding an item to one loop for life, as a value its owner guards with a lock of
/// its own: `ItemBinding` (every item but the timer) and `LoopTimer` (which keeps it in itself,
/// under a shared lock stripe) both use it, so the rules live in one place.
///
/// CF binds timers and observers to one run loop for life and quietly ignores attempts to add
/// them to another; RunLoopKit binds every item the same way but throws instead.
struct BindingState {
  /// The loop the item is bound to, while that loop exists.
  weak var loop: Loop?
  /// Set by the first successful bind: once the loop is gone (its thread exited and nothing
  /// holds it), the item must not move to another loop and run on a second thread.
  private var everBound = false
  /// False once the item was invalidated.
  private(set) var isValid = true

  /// Binds to `target` on first use; refuses another loop or an invalidated item. Returns
  /// whether this call made the binding (so a failed first add can undo it).
  mutating func bind(to target: Loop, kind: String) throws(LoopError) -> Bool {
    guard isValid else { throw .invalidated(item: kind) }
    if let current = loop {
      guard current === target else { throw .boundToAnotherLoop(item: kind) }
      return false
    }
    guard !everBound else { throw .boundToAnotherLoop(item: kind) }
    loop = target
    everBound = true
    return true
  }

  /// Undoes a binding made by an add that then failed, so the item is free again.
  mutating func unbind() {
    loop = nil
    everBound = false
  }

  /// Marks the item invalid; returns whether it was valid until now, and its loop.
  mutating func invalidate() -> (wasValid: Bool, loop: Loop?) {
    let wasValid = isValid
    isValid = false
    return (wasValid, loop)
  }
}
