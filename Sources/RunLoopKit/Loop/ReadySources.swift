/// A mode's signalled manual sources, in the order the manual-source phase performs them: by
/// `order`, then by signal time (CF sorts the signalled sources of a pass the same way).
///
/// CF finds them by walking every version-0 source of the mode on every pass, which makes a
/// pass cost what exists rather than what is ready: with a million sources and one signalled,
/// 34 events a second. Here a signalled source reaches the ready sources of each of its modes
/// (through `SignalInbox`, or directly when it joins a mode already signalled), and the phase
/// takes from them only: O(1) per source performed when sources come in order, O(log ready)
/// otherwise, whatever the mode holds.
///
/// Two parts, each knowing where its sources sit (`ManualSource.Slot.readyIndex`), so a
/// source that leaves the mode, is invalidated or is performed in another mode is taken out
/// with no search:
/// - a queue of the sources that came in order (none precedes the one queued before it):
///   nearly all of them, since sources are signalled one after another and most share one
///   `order`. First in, first out, so nothing else moves: in a binary heap each step of a
///   sift writes the index of the source it moves, a cache miss per step once the sources
///   number a million (measured: the sifts took about two fifths of the loop thread's time).
/// - a binary min-heap of the others, O(log n) per insert and removal.
///
/// The first of the two fronts is performed next. Invariant: a source is here at most once,
/// only while it is signalled and in the mode. Guarded by the owning loop's lock.
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

  /// Where a source is not in this structure. A heap position is 0 or more; a queued
  /// entry's is `-2 - ordinal`, its ordinal counted from `queueBase`.
  static let absent = -1

  /// The heap.
  @exclusivity(unchecked) private var entries: [Entry] = []
  /// The queue: live entries from `queueHead` on, nil where a removal left a hole. The head
  /// is live whenever `queued` is not zero.
  @exclusivity(unchecked) private var queue: [Entry?] = []
  @exclusivity(unchecked) private var queueHead = 0
  /// The ordinal of `queue[0]` (compacting the queue moves no entry's ordinal).
  @exclusivity(unchecked) private var queueBase = 0
  /// Live entries in the queue.
  @exclusivity(unchecked) private var queued = 0
  /// Holes after the head: removals that were not at the head (a source performed in another
  /// mode, invalidated, removed). Bounded (see `removeQueued`), so a head that stays while
  /// others come and go cannot grow the queue without end.
  @exclusivity(unchecked) private var holes = 0
  /// The entry queued last (live or not): what a newcomer must not precede to be queued.
  @exclusivity(unchecked) private var lastQueued: Entry?

  /// Entries placed or moved (an insert, a removal, each step of a sift), for tests that
  /// check a pass's work follows what is ready, not what the mode holds.
  @exclusivity(unchecked) private(set) var moves = 0

  /// Slots the queue holds from its head on, holes included (for tests of its bound).
  var queueSlots: Int { queue.count - queueHead }

  var isEmpty: Bool { entries.isEmpty && queued == 0 }
  var count: Int { entries.count + queued }

  func insert(_ source: ManualSource, sequence: UInt64, stamp: UInt64) {
    let entry = Entry(order: source.order, sequence: sequence, stamp: stamp, source: source)
    if let last = lastQueued, entry.precedes(last) {
      entries.append(entry)
      siftUp(from: entries.count - 1)
      return
    }
    moves += 1
    queue.append(entry)
    queued += 1
    lastQueued = entry
    source.setReadyIndex(-2 - (queueBase + queue.count - 1), in: self)
  }

  /// Takes out the first entry (the source's index here becomes `absent`).
  func popFirst() -> Entry? {
    if queued > 0, let head = queue[queueHead] {
      if let top = entries.first, top.precedes(head) {
        removeFromHeap(at: 0)
        return top
      }
      removeQueued(at: queueHead)
      return head
    }
    guard let first = entries.first else { return nil }
    removeFromHeap(at: 0)
    return first
  }

  /// Takes out the entry at `index` (the source's index here becomes `absent`).
  func remove(at index: Int) {
    if index >= 0 {
      removeFromHeap(at: index)
    } else {
      removeQueued(at: -2 - index - queueBase)
    }
  }

  // MARK: The queue

  private func removeQueued(at position: Int) {
    moves += 1
    queue[position]?.source.setReadyIndex(ReadySources.absent, in: self)
    queue[position] = nil
    queued -= 1
    guard queued > 0 else {
      // Empty: the next entry is queued whatever it is. The storage is emptied once it grew
      // (cheaper than at every pop, when one source at a time comes and goes).
      lastQueued = nil
      holes = 0
      queueHead = queue.count
      if queueHead >= 64 { dropBeforeHead() }
      return
    }
    guard position == queueHead else {
      holes += 1
      // More holes than entries: the live ones are moved up, each told its new place, which
      // costs no more than the removals that made the holes.
      if holes > queued + 64 { packQueue() }
      return
    }
    queueHead += 1
    while queue[queueHead] == nil {
      queueHead += 1
      holes -= 1
    }
    if queueHead >= 64 && queueHead * 2 >= queue.count { dropBeforeHead() }
  }

  /// Drops the entries before the head; the ordinals of those left do not change.
  private func dropBeforeHead() {
    queue.removeFirst(queueHead)
    queueBase += queueHead
    queueHead = 0
    if queue.isEmpty { queueBase = 0 }
  }

  /// Moves the live entries to the front, in order, with no hole between them, and tells
  /// each source its new place.
  private func packQueue() {
    var packed = 0
    for position in queueHead..<queue.count {
      guard let entry = queue[position] else { continue }
      queue[packed] = entry
      entry.source.setReadyIndex(-2 - packed, in: self)
      packed += 1
    }
    queue.removeLast(queue.count - packed)
    queueHead = 0
    queueBase = 0
    holes = 0
  }

  // MARK: The heap

  private func removeFromHeap(at index: Int) {
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
