/// A manual source's modes and where it sits in each mode's ready sources, with the first kept
/// inline: nearly every source is in one mode, and finding its index there then costs no second
/// allocation to chase — a cache miss per signal taken from the inbox once a loop holds a
/// million sources (as `TimerSlots` does for timers). Guarded by the owner loop's lock.
struct ManualSourceSlots: RandomAccessCollection, MutableCollection {
  private var first: ManualSource.Slot?
  private var others: [ManualSource.Slot] = []

  var startIndex: Int { 0 }
  var endIndex: Int { first == nil ? 0 : 1 + others.count }

  subscript(position: Int) -> ManualSource.Slot {
    get { position == 0 ? first! : others[position - 1] }
    set {
      if position == 0 { first = newValue } else { others[position - 1] = newValue }
    }
  }

  mutating func append(_ slot: ManualSource.Slot) {
    if first == nil { first = slot } else { others.append(slot) }
  }

  mutating func remove(at position: Int) {
    if position == 0 {
      first = others.isEmpty ? nil : others.removeFirst()
    } else {
      others.remove(at: position - 1)
    }
  }
}
