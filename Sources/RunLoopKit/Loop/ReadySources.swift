/// A mode's signalled manual sources, in the order the manual-source phase performs them: by
/// `order`, then by signal time (CF sorts the signalled sources of a pass the same way).
///
/// CF finds them by walking every version-0 source of the mode on every pass, which makes a
/// pass cost what exists rather than what is ready: with a million sources and one signalled,
/// 34 events a second. Here a signalled source reaches the heap of each of its modes (through
/// `SignalInbox`, or directly when it joins a mode already signalled), and the phase takes
/// from this heap only: O(log ready) per source performed, whatever the mode holds.
///
/// A binary min-heap that knows where each source sits (`ManualSource.Slot.readyIndex`), so
/// a source that leaves the mode, is invalidated or is performed in another mode is taken out
/// of this heap in O(log n) with no search. Invariant: a source is here at most once, only
/// while it is signalled and in the mode. Guarded by the owning loop's lock.
final class ReadySources {
  struct Entry {
    let order: Int
    /// The source's signal tick (`ManualSource.signalKey`) when it got here: unchanged while
    /// it stays signalled.
    let sequence: UInt64
    /// When it got here, by the loop's `readyStamps`: a phase performs only sources that were
    /// here when it began, as CF performs only those its walk collected.
    let stamp: UInt64
    /// Unowned: an entry exists only while its source is in the mode, whose `manualSources`
    /// holds it, so moving entries costs no reference counting.
    unowned(unsafe) let source: ManualSource

    func precedes(_ other: Entry) -> Bool {
      order != other.order ? order < other.order : sequence < other.sequence
    }
  }

  /// Where a source is not in this heap.
  static let absent = -1

  @exclusivity(unchecked) private var entries: [Entry] = []

  /// Entries placed or moved (an insert, a removal, each step of a sift), for tests that
  /// check a pass's work follows what is ready, not what the mode holds.
  @exclusivity(unchecked) private(set) var moves = 0

  var isEmpty: Bool { entries.isEmpty }
  var count: Int { entries.count }

  func insert(_ source: ManualSource, sequence: UInt64, stamp: UInt64) {
    entries.append(Entry(order: source.order, sequence: sequence, stamp: stamp, source: source))
    siftUp(from: entries.count - 1)
  }

  /// Takes out the first entry (the source's index here becomes `absent`).
  func popFirst() -> Entry? {
    guard let first = entries.first else { return nil }
    remove(at: 0)
    return first
  }

  /// Takes out the entry at `index` (the source's index here becomes `absent`).
  func remove(at index: Int) {
    moves += 1
    entries[index].source.setReadyIndex(ReadySources.absent, in: self)
    let last = entries.removeLast()
    guard index < entries.count else { return }
    entries[index] = last
    if index > 0 && last.precedes(entries[(index - 1) / 2]) {
      siftUp(from: index)
    } else {
      siftDown(from: index)
    }
  }

  private func siftUp(from start: Int) {
    let entry = entries[start]
    var hole = start
    while hole > 0 {
      let parent = (hole - 1) / 2
      guard entry.precedes(entries[parent]) else { break }
      move(from: parent, to: hole)
      hole = parent
    }
    entries[hole] = entry
    entry.source.setReadyIndex(hole, in: self)
    moves += 1
  }

  private func siftDown(from start: Int) {
    let entry = entries[start]
    var hole = start
    while true {
      var child = 2 * hole + 1
      if child >= entries.count { break }
      if child + 1 < entries.count && entries[child + 1].precedes(entries[child]) { child += 1 }
      guard entries[child].precedes(entry) else { break }
      move(from: child, to: hole)
      hole = child
    }
    entries[hole] = entry
    entry.source.setReadyIndex(hole, in: self)
    moves += 1
  }

  private func move(from index: Int, to hole: Int) {
    moves += 1
    entries[hole] = entries[index]
    entries[hole].source.setReadyIndex(hole, in: self)
  }
}
