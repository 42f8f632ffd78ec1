/// The rules binding an item to one loop for life, as a value its owner guards with a lock of
/// its own: `ItemBinding` (every item but the timer) and `LoopTimer` (which keeps it in itself,
/// under a shared lock stripe) both use it, so the rules live in one place.
///
/// CF binds timers and observers to one run loop for life and quietly ignores attempts to add
/// them to another; RunLoopKit binds every item the same way but throws instead.
struct BindingState {
  /// The loop the item is bound to, until the item is invalidated.
  ///
  /// A strong reference, so a valid item keeps its loop's object (not its thread) alive. A
  /// weak one would give every loop a side table, which makes every retain of the loop take
  /// the runtime's slow path and made binding a timer cost a fifth of its add (measured with
  /// a million timers). No cycle outlives the loop's thread: when the thread exits, the loop
  /// invalidates every item it still holds, and invalidating drops this reference.
  private(set) var loop: Loop?
  /// False once the item was invalidated.
  private(set) var isValid = true

  /// Binds to `target` on first use; refuses another loop or an invalidated item. Returns
  /// whether this call made the binding (so a failed first add can undo it).
  mutating func bind(to target: Loop, kind: String) throws(LoopError) -> Bool {
    guard isValid else { throw .invalidated(item: kind) }
    if loop != nil {
      guard loop === target else { throw .boundToAnotherLoop(item: kind) }
      return false
    }
    loop = target
    return true
  }

  /// `bind(to:kind:)`'s usual case, inlined: binds a valid, unbound item and returns true;
  /// returns false, changing nothing, for any other (which `bind(to:kind:)` then decides).
  @inline(__always)
  mutating func bindIfFree(to target: Loop) -> Bool {
    guard isValid, loop == nil else { return false }
    loop = target
    return true
  }

  /// Undoes a binding made by an add that then failed, so the item is free again.
  mutating func unbind() {
    loop = nil
  }

  /// Marks the item invalid; returns whether it was valid until now, and its loop, which the
  /// item no longer references (the caller releases it, outside any lock).
  mutating func invalidate() -> (wasValid: Bool, loop: Loop?) {
    let wasValid = isValid
    isValid = false
    return (wasValid, loop.take())
  }
}
