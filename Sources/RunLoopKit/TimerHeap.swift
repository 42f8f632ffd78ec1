/// Where a timer sits in one mode's heap. A timer in several modes has one slot per mode.
struct TimerSlot {
  unowned let mode: ModeState
  var heap: TimerHeap { mode.timers }
  /// The timer's index in `heap.entries`, or `nil` while it is out of the heap (firing).
  var index: Int?
}

/// A mode's pending timers: a binary min-heap ordered by fire date (ties: creation order).
///
/// Each timer records its own index in every heap it is in (`LoopTimer.slots`), so removing or
/// re-keying a timer is O(log n) with no search, which is what lets a mode hold a million
/// timers. Everything here is guarded by the owning loop's lock.
final class TimerHeap {
  struct Entry {
    var fireDate: LoopClock.Instant
    var tolerance: Duration
    let sequence: UInt64
    let timer: LoopTimer

    func precedes(_ other: Entry) -> Bool {
      (fireDate, sequence) < (other.fireDate, other.sequence)
    }
  }

  private(set) var entries: [Entry] = []
  /// Element moves made by sifting, for tests that check removal really is logarithmic.
  private(set) var moveCount = 0

  var count: Int { entries.count }
  var isEmpty: Bool { entries.isEmpty }
  var earliest: Entry? { entries.first }

  func insert(
    _ timer: LoopTimer, in mode: ModeState, fireDate: LoopClock.Instant, tolerance: Duration
  ) {
    precondition(mode.timers === self)
    entries.append(
      Entry(fireDate: fireDate, tolerance: tolerance, sequence: timer.sequence, timer: timer))
    timer.slots.append(TimerSlot(mode: mode, index: entries.count - 1))
    siftUp(entries.count - 1)
  }

  /// Takes `timer` out of the heap but leaves its slot (index `nil`), as while it fires.
  func detach(_ timer: LoopTimer) {
    guard let index = slotIndex(of: timer) else { return }
    removeEntry(at: index)
    setIndex(nil, for: timer)
  }

  /// Puts a detached timer back with a new key.
  func reattach(_ timer: LoopTimer, fireDate: LoopClock.Instant, tolerance: Duration) {
    precondition(slotIndex(of: timer) == nil)
    entries.append(
      Entry(fireDate: fireDate, tolerance: tolerance, sequence: timer.sequence, timer: timer))
    setIndex(entries.count - 1, for: timer)
    siftUp(entries.count - 1)
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
    siftUp(index)
    if let moved = slotIndex(of: timer) { siftDown(moved) }
  }

  /// Every timer due at `now`, earliest first, without removing any. The heap order lets
  /// the walk stop at the first entry of each subtree that is not due.
  func due(at now: LoopClock.Instant) -> [LoopTimer] {
    var found: [Entry] = []
    var pending = entries.isEmpty ? [] : [0]
    while let index = pending.popLast() {
      guard entries[index].fireDate <= now else { continue }
      found.append(entries[index])
      if 2 * index + 1 < entries.count { pending.append(2 * index + 1) }
      if 2 * index + 2 < entries.count { pending.append(2 * index + 2) }
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
    var pending = [0]
    while let index = pending.popLast() {
      let entry = entries[index]
      if entry.fireDate > best { continue }
      best = min(best, entry.fireDate.advanced(by: entry.tolerance))
      if 2 * index + 1 < entries.count { pending.append(2 * index + 1) }
      if 2 * index + 2 < entries.count { pending.append(2 * index + 2) }
    }
    return best
  }

  // MARK: - Heap mechanics

  func slotIndex(of timer: LoopTimer) -> Int? {
    timer.slots.first { $0.heap === self }?.index
  }

  private func setIndex(_ index: Int?, for timer: LoopTimer) {
    for position in timer.slots.indices where timer.slots[position].heap === self {
      timer.slots[position].index = index
      return
    }
  }

  private func removeEntry(at index: Int) {
    let last = entries.count - 1
    if index != last {
      entries.swapAt(index, last)
      setIndex(index, for: entries[index].timer)
    }
    entries.removeLast()
    if index < entries.count {
      siftUp(index)
      siftDown(index)
    }
  }

  private func siftUp(_ start: Int) {
    var child = start
    while child > 0 {
      let parent = (child - 1) / 2
      guard entries[child].precedes(entries[parent]) else { break }
      swap(child, parent)
      child = parent
    }
  }

  private func siftDown(_ start: Int) {
    var parent = start
    while true {
      var smallest = parent
      let left = 2 * parent + 1
      let right = left + 1
      if left < entries.count && entries[left].precedes(entries[smallest]) { smallest = left }
      if right < entries.count && entries[right].precedes(entries[smallest]) { smallest = right }
      if smallest == parent { return }
      swap(parent, smallest)
      parent = smallest
    }
  }

  private func swap(_ a: Int, _ b: Int) {
    entries.swapAt(a, b)
    setIndex(a, for: entries[a].timer)
    setIndex(b, for: entries[b].timer)
    moveCount += 1
  }
}
