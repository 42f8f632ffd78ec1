/// A mode's manual sources, in an array where each source knows its own position
/// (`ManualSource.Slot.listIndex`): adding and removing are O(1) with no hashing, where the
/// identity-keyed `ItemSet` hashed each source on every add and every removal (about 500
/// instructions of a source's make, add, invalidate and free: callgrind). Removal moves the
/// last source into the hole, so the array is in no order; the order sources joined in is
/// kept as a sequence number, for the few walks that need it. Guarded by the owning loop's
/// lock.
final class ManualSourceList {
  struct Entry {
    /// When the source joined: later joins get larger numbers.
    let sequence: UInt64
    let source: ManualSource
  }

  @exclusivity(unchecked) private var entries: [Entry] = []
  @exclusivity(unchecked) private var nextSequence: UInt64 = 0
  /// The work done, counted as `ItemSet` counts it (one per add or removal, one per source a
  /// walk visits), for tests that check how adding, removing and passes scale.
  @exclusivity(unchecked) private(set) var steps = 0

  var count: Int { entries.count }
  var isEmpty: Bool { entries.isEmpty }

  /// Adds `source`, whose slot for this list's mode is at `slot` in `source.slots`, and
  /// records its position there.
  func insert(_ source: ManualSource, slot: Int) {
    steps += 1
    source.slots[slot].listIndex = entries.count
    entries.append(Entry(sequence: nextSequence, source: source))
    nextSequence += 1
  }

  /// Removes the source at `index` (its slot's `listIndex`); the last source takes its place.
  func remove(at index: Int) {
    steps += 1
    let last = entries.removeLast()
    guard index < entries.count else { return }
    entries[index] = last
    last.source.setListIndex(index, in: self)
  }

  /// Calls `body` with every source, in no particular order (for a walk whose result is
  /// sorted).
  func visitAll(_ body: (ManualSource) -> Void) {
    steps += entries.count
    for entry in entries { body(entry.source) }
  }

  /// The sources in the order they joined. O(n log n): for rare walks only.
  var inOrder: [ManualSource] {
    steps += entries.count
    return entries.sorted { $0.sequence < $1.sequence }.map(\.source)
  }
}
