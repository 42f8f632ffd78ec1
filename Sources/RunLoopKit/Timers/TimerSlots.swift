/// Where a timer sits in one mode's heap. A timer in several modes has one slot per mode.
///
/// The references are `unowned(unsafe)`: heap sifting reads them on every swap, and a safe
/// unowned or strong reference would cost atomic reference counting each time. They are
/// sound because a slot never outlives its mode. Every slot's timer is reachable from its
/// loop — in the slot's heap, or in `Loop.firingTimers` while its callout runs (index `nil`)
/// — and a loop tearing down detaches every timer it can reach before it lets its modes go.
/// A callout's end puts the timer back in its heaps or, if it was invalidated meanwhile,
/// removes every slot (`Loop.retireTimerLocked`), so no slot is ever out of both.
struct TimerSlot {
  unowned(unsafe) let mode: ModeState
  unowned(unsafe) let heap: TimerHeap
  /// The timer's index in `heap.entries`, or `nil` while it is out of the heap (firing).
  var index: Int?

  /// Calls `body` with the mode, taking no reference to it (no atomic reference counting on
  /// the cancel path; the slot's own reference is sound, as above).
  @inline(__always)
  func withMode<Result>(_ body: (ModeState) -> Result) -> Result {
    Unmanaged.passUnretained(mode)._withUnsafeGuaranteedRef(body)
  }

  /// `withMode` for the heap.
  @inline(__always)
  func withHeap<Result>(_ body: (TimerHeap) -> Result) -> Result {
    Unmanaged.passUnretained(heap)._withUnsafeGuaranteedRef(body)
  }

  init(mode: ModeState, index: Int?) {
    self.init(mode: mode, heap: mode.timers, index: index)
  }

  /// For a caller that has the mode's heap at hand already (`heap` is `mode.timers`).
  init(mode: ModeState, heap: TimerHeap, index: Int?) {
    self.mode = mode
    self.heap = heap
    self.index = index
  }
}

/// A timer's slots, with the first kept inline: nearly every timer is in exactly one mode, and
/// reading its heap index then costs no second allocation to chase (it matters when a heap of
/// a million timers is sifted).
struct TimerSlots: RandomAccessCollection, MutableCollection {
  private var first: TimerSlot?
  private var others: [TimerSlot] = []

  var startIndex: Int { 0 }
  var endIndex: Int { first == nil ? 0 : 1 + others.count }

  subscript(position: Int) -> TimerSlot {
    get { position == 0 ? first! : others[position - 1] }
    set {
      if position == 0 { first = newValue } else { others[position - 1] = newValue }
    }
  }

  mutating func append(_ slot: TimerSlot) {
    if first == nil { first = slot } else { others.append(slot) }
  }

  /// Whether the timer has a slot in `heap` (it is in that heap, or firing out of it), without
  /// a closure call or a walk when it has at most one slot.
  func hasSlot(in heap: TimerHeap) -> Bool {
    guard let first else { return false }
    return first.heap === heap || others.contains { $0.heap === heap }
  }

  /// The index stored for `heap`, without walking anything when it is the first slot.
  func index(in heap: TimerHeap) -> Int? {
    if let first, first.heap === heap { return first.index }
    return others.first { $0.heap === heap }?.index
  }

  /// Takes the first slot off, or nil when there is none (a cancel leaving every mode in
  /// turn: nearly always one slot, and then no walk and no comparison of heaps).
  mutating func popFirst() -> TimerSlot? {
    guard let slot = first else { return nil }
    first = others.isEmpty ? nil : others.removeFirst()
    return slot
  }

  /// Removes the slot for `heap`; returns the index it held (nil if it had none, or no slot).
  mutating func removeSlot(of heap: TimerHeap) -> Int? {
    if let slot = first, slot.heap === heap {
      first = others.isEmpty ? nil : others.removeFirst()
      return slot.index
    }
    guard let position = others.firstIndex(where: { $0.heap === heap }) else { return nil }
    return others.remove(at: position).index
  }

  mutating func setIndex(_ index: Int?, in heap: TimerHeap) {
    if first?.heap === heap {
      first!.index = index
      return
    }
    if let position = others.firstIndex(where: { $0.heap === heap }) {
      others[position].index = index
    }
  }
}
