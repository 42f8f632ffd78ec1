/// A mode's pending timers: a 4-ary min-heap ordered by fire date (ties: creation order).
///
/// Each timer records its own index in every heap it is in (`LoopTimer.slots`), so removing or
/// re-keying a timer is O(log n) with no search, which is what lets a mode hold a million
/// timers. Four children per node halve the depth of a binary heap (10 levels for a million
/// timers instead of 20), and each level's children sit in one or two cache lines, so a sift
/// touches far fewer timer objects. Everything here is guarded by the owning loop's lock.
final class TimerHeap {
  static let arity = 4

  struct Entry {
    var fireDate: LoopClock.Instant
    var tolerance: Duration
    let sequence: UInt64
    /// Retained by the heap for as long as the entry is in it (released in `removeEntry` and
    /// `deinit`). Unmanaged so sifting can move entries and update the timers' indices without
    /// retain/release traffic on every step.
    let reference: Unmanaged<LoopTimer>

    var timer: LoopTimer { reference.takeUnretainedValue() }

    func precedes(_ other: Entry) -> Bool {
      (fireDate, sequence) < (other.fireDate, other.sequence)
    }
  }

  private(set) var entries: [Entry] = []
  /// Element moves made by sifting, for tests that check removal really is logarithmic.
  private(set) var moveCount = 0

  deinit {
    for entry in entries { entry.reference.release() }
  }

  var count: Int { entries.count }
  var isEmpty: Bool { entries.isEmpty }
  var earliest: Entry? { entries.first }

  func insert(
    _ timer: LoopTimer, in mode: ModeState, fireDate: LoopClock.Instant, tolerance: Duration
  ) {
    precondition(mode.timers === self)
    timer.slots.append(TimerSlot(mode: mode, index: nil))
    append(timer, fireDate: fireDate, tolerance: tolerance)
  }

  /// Takes `timer` out of the heap but leaves its slot (index `nil`), as while it fires.
  func detach(_ timer: LoopTimer) {
    guard let index = slotIndex(of: timer) else { return }
    removeEntry(at: index)
    timer.slots.setIndex(nil, in: self)
  }

  /// Puts a detached timer back with a new key.
  func reattach(_ timer: LoopTimer, fireDate: LoopClock.Instant, tolerance: Duration) {
    precondition(slotIndex(of: timer) == nil)
    append(timer, fireDate: fireDate, tolerance: tolerance)
  }

  /// Removes `timer` and its slot altogether.
  func remove(_ timer: LoopTimer) {
    detach(timer)
    timer.slots.removeAll { $0.heap === self }
  }

  /// Changes the key of a timer that is in the heap.
  func update(_ timer: LoopTimer, fireDate: LoopClock.Instant, tolerance: Duration) {
    guard let index = slotIndex(of: timer) else { return }
    entries[index].fireDate = fireDate
    entries[index].tolerance = tolerance
    record(siftDown(siftUp(index)))
  }

  /// Every timer due at `now`, earliest first, without removing any. The heap order lets
  /// the walk stop at the first entry of each subtree that is not due.
  func due(at now: LoopClock.Instant) -> [LoopTimer] {
    var found: [Entry] = []
    var pending = entries.isEmpty ? [] : [0]
    while let index = pending.popLast() {
      guard entries[index].fireDate <= now else { continue }
      found.append(entries[index])
      pending += children(of: index)
    }
    return found.sorted { $0.precedes($1) }.map(\.timer)
  }

  /// When the mode's timerfd should go off: the earliest `fireDate + tolerance` over every
  /// timer. Only timers whose fire date is before the best candidate so far can lower it, and
  /// the heap order lets whole subtrees past that point be skipped, so this visits just the
  /// timers inside the first timer's tolerance window.
  func wakeDeadline() -> LoopClock.Instant? {
    guard let first = entries.first else { return nil }
    var best = first.fireDate.advanced(by: first.tolerance)
    if first.tolerance == .zero { return best }  // nothing can beat the earliest fire date
    var pending = [0]
    while let index = pending.popLast() {
      let fireDate = entries[index].fireDate
      if fireDate > best { continue }
      best = min(best, fireDate.advanced(by: entries[index].tolerance))
      pending += children(of: index)
    }
    return best
  }

  // MARK: - Heap mechanics

  func slotIndex(of timer: LoopTimer) -> Int? {
    timer.slots.index(in: self)
  }

  private func children(of index: Int) -> Range<Int> {
    let first = TimerHeap.arity * index + 1
    return min(first, entries.count)..<min(first + TimerHeap.arity, entries.count)
  }

  /// `entries[a]` comes before `entries[b]`; compares keys in place.
  private func precedes(_ a: Int, _ b: Int) -> Bool {
    let lhs = entries[a].fireDate
    let rhs = entries[b].fireDate
    return lhs < rhs || (lhs == rhs && entries[a].sequence < entries[b].sequence)
  }

  private func append(_ timer: LoopTimer, fireDate: LoopClock.Instant, tolerance: Duration) {
    entries.append(
      Entry(
        fireDate: fireDate, tolerance: tolerance, sequence: timer.sequence,
        reference: .passRetained(timer)))
    let index = siftUp(entries.count - 1)
    timer.slots.setIndex(index, in: self)
  }

  private func removeEntry(at index: Int) {
    let last = entries.count - 1
    if index != last { entries.swapAt(index, last) }
    entries.removeLast().reference.release()
    if index < entries.count {
      let settled = siftDown(siftUp(index))
      record(settled)
    }
  }

  /// Moves the entry at `start` towards the root while it precedes its parent; every entry it
  /// passes learns its new index. Returns where the moving entry ends (its own index is left
  /// for the caller to record).
  @discardableResult
  private func siftUp(_ start: Int) -> Int {
    var child = start
    while child > 0 {
      let parent = (child - 1) / TimerHeap.arity
      guard precedes(child, parent) else { break }
      entries.swapAt(child, parent)
      record(child)
      child = parent
      moveCount += 1
    }
    return child
  }

  /// Moves the entry at `start` towards the leaves while a child precedes it.
  @discardableResult
  private func siftDown(_ start: Int) -> Int {
    var parent = start
    while true {
      var smallest = parent
      for child in children(of: parent) where precedes(child, smallest) { smallest = child }
      if smallest == parent { return parent }
      entries.swapAt(parent, smallest)
      record(parent)
      parent = smallest
      moveCount += 1
    }
  }

  /// Stores `index` as the heap index of the timer now at `index`.
  private func record(_ index: Int) {
    entries[index].reference._withUnsafeGuaranteedRef { $0.slots.setIndex(index, in: self) }
  }
}
