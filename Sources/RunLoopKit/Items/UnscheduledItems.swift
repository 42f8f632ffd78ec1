/// The items bound to a loop that are in none of its modes and not in `.common`: removed from
/// their last mode, and neither invalidated nor dropped. Teardown must reach them too — a
/// `LoopPort` taken out of its modes must refuse sends once its loop is gone, and every item
/// bound to a torn-down loop must read as invalid — but holding them strongly would keep a
/// removed item alive for the rest of its thread's life (CF frees a removed source nobody
/// else holds). So they are held weakly. An item that is freed leaves an empty entry behind,
/// swept when the table has doubled since the last sweep.
///
/// An item leaves the table when it is invalidated. One added back to a mode stays listed
/// (adding a million timers should not pay a lookup here), which costs nothing: teardown
/// invalidates it once through its mode and once more, to no effect, through this table.
/// Guarded by the owning loop's lock.
final class UnscheduledItems {
  private struct Entry {
    weak var item: (any LoopItem)?
  }

  /// `@exclusivity(unchecked)`: the loop's lock makes every access exclusive, and a cancel
  /// reads `isEmpty` (a dynamic check cost it about 75 instructions, a tenth of the cancel).
  @exclusivity(unchecked) private var entries: [ObjectIdentifier: Entry] = [:]
  /// The count at which the next insert sweeps out freed items.
  private var sweepAt = 64

  var isEmpty: Bool { entries.isEmpty }

  /// Adds `item`. Returns the items a sweep found alive: looking at an entry takes a strong
  /// reference to its item, which may then be the last one (another thread dropped its own
  /// meanwhile), so the caller must let them go only after the loop's lock, as everything
  /// the loop releases.
  func insert(_ item: any LoopItem) -> [any LoopItem] {
    entries[ObjectIdentifier(item)] = Entry(item: item)
    guard entries.count >= sweepAt else { return [] }
    var alive: [any LoopItem] = []
    entries = entries.filter { entry in
      guard let item = entry.value.item else { return false }
      alive.append(item)
      return true
    }
    sweepAt = max(64, entries.count * 2)
    return alive
  }

  func remove(_ item: any LoopItem) {
    // The key may be a freed item's whose address `item` now has: dropping that entry is
    // what a sweep would do anyway.
    entries[ObjectIdentifier(item)] = nil
  }

  /// Empties the table and hands back the items still alive.
  func removeAll() -> [any LoopItem] {
    defer { entries = [:] }
    return entries.values.compactMap(\.item)
  }
}
