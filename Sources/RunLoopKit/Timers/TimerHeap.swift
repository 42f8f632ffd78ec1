/// A mode's pending timers: a 4-ary min-heap ordered by fire date (ties: creation order).
///
/// Each timer records its own index in every heap it is in (`LoopTimer.slots`), so removing or
/// re-keying a timer is O(log n) with no search, which is what lets a mode hold a million
/// timers. At that size nearly every step of a sift is a cache miss, so the layout is chosen
/// to make each level cost one: an entry is 16 bytes (fire date and timer), four children fill
/// one 64-byte line, and the storage is aligned so every group of siblings starts a line. Four
/// children per node also halve the depth of a binary heap (10 levels for a million timers).
/// Sifting moves entries into a hole rather than swapping, and the storage is a raw buffer, so
/// a step is a compare and a copy with no uniqueness or bounds check. Everything here is
/// guarded by the owning loop's lock.
final class TimerHeap {
  static let arity = 4
  /// Unused entries before index 0: children of `i` start at `4i + 1`, which this shifts to a
  /// multiple of four entries, that is of 64 bytes.
  private static let lead = arity - 1
  private static let alignment = 64

  struct Entry {
    var fireDate: LoopClock.Instant
    /// Retained by the heap for as long as the entry is in it (released in `removeEntry` and
    /// `deinit`). Unmanaged so sifting can move entries and update the timers' indices without
    /// retain/release traffic on every step.
    let reference: Unmanaged<LoopTimer>

    var timer: LoopTimer { reference.takeUnretainedValue() }

    /// Fire date, then creation order. The sequence lives in the timer, not the entry, to keep
    /// entries at 16 bytes; it is read only when two fire dates are equal.
    func precedes(_ other: Entry) -> Bool {
      if fireDate.nanoseconds != other.fireDate.nanoseconds {
        return fireDate.nanoseconds < other.fireDate.nanoseconds
      }
      return reference._withUnsafeGuaranteedRef { $0.sequence }
        < other.reference._withUnsafeGuaranteedRef { $0.sequence }
    }
  }

  /// The allocation, and `lead` entries into it the entry at index 0.
  private var allocation: UnsafeMutableRawPointer
  private var storage: UnsafeMutablePointer<Entry>
  private var capacity: Int
  private(set) var count = 0
  /// `appendDue`'s work list, kept between calls.
  private var dueIndices: [Int] = []
  /// Element moves made by sifting, for tests that check removal really is logarithmic.
  private(set) var moveCount = 0

  init() {
    capacity = 16
    (allocation, storage) = TimerHeap.allocate(capacity)
  }

  deinit {
    for index in 0..<count { storage[index].reference.release() }
    allocation.deallocate()
  }

  var isEmpty: Bool { count == 0 }
  var earliest: Entry? { count == 0 ? nil : storage[0] }
  /// Every entry, in heap order (a copy, for descriptions and teardown).
  var entries: [Entry] { Array(UnsafeBufferPointer(start: storage, count: count)) }

  /// Adds `timer`, which has no slot here yet, and gives it one: made once its index is
  /// known, so the add writes the slot once and looks nothing up. The tolerance is in
  /// nanoseconds, as the timer keeps it (no `Duration` arithmetic on the add).
  func insert(
    _ timer: LoopTimer, in mode: ModeState, fireDate: LoopClock.Instant, tolerance: Int64
  ) {
    precondition(mode.timers === self)
    timer.scheduledTolerance = tolerance
    let index = place(timer, fireDate: fireDate)
    timer.slots.append(TimerSlot(mode: mode, heap: self, index: index))
  }

  /// Takes `timer` out of the heap but leaves its slot (index `nil`), as while it fires.
  func detach(_ timer: LoopTimer) {
    guard let index = slotIndex(of: timer) else { return }
    timer.slots.setIndex(nil, in: self)
    removeEntry(at: index)
  }

  /// Puts a detached timer back with a new key.
  func reattach(_ timer: LoopTimer, fireDate: LoopClock.Instant, tolerance: Int64) {
    precondition(slotIndex(of: timer) == nil)
    timer.scheduledTolerance = tolerance
    timer.slots.setIndex(place(timer, fireDate: fireDate), in: self)
  }

  /// Removes `timer` and its slot altogether.
  func remove(_ timer: LoopTimer) {
    guard let index = timer.slots.removeSlot(of: self) else { return }
    removeEntry(at: index)
  }

  /// Removes the entry at `index`, where a slot the caller has just taken off its timer said
  /// the timer is (a cancel: no lookup of the slot by heap).
  func remove(at index: Int) {
    removeEntry(at: index)
  }

  /// Changes the key of a timer that is in the heap.
  func update(_ timer: LoopTimer, fireDate: LoopClock.Instant, tolerance: Int64) {
    guard let index = slotIndex(of: timer) else { return }
    timer.scheduledTolerance = tolerance
    var entry = storage[index]
    entry.fireDate = fireDate
    record(settle(entry, at: index))
  }

  /// Appends every timer due at `now` to `found`, earliest first, without removing any. The
  /// heap order lets the walk stop at the first entry of each subtree that is not due. The
  /// caller reuses `found`'s buffer and the walk reuses `dueIndices`, so a timer phase
  /// allocates nothing once they have grown.
  func appendDue(at now: LoopClock.Instant, to found: inout [LoopTimer]) {
    guard count > 0, storage[0].fireDate <= now else { return }
    // Breadth first, the list of due indices serving as its own queue.
    dueIndices.removeAll(keepingCapacity: true)
    dueIndices.append(0)
    var next = 0
    while next < dueIndices.count {
      for child in children(of: dueIndices[next]) where storage[child].fireDate <= now {
        dueIndices.append(child)
      }
      next += 1
    }
    let entries = storage
    dueIndices.sort { entries[$0].precedes(entries[$1]) }
    for index in dueIndices { found.append(storage[index].timer) }
  }

  /// Calls `body` with every timer in the heap, in no particular order.
  func forEachTimer(_ body: (LoopTimer) -> Void) {
    for index in 0..<count { body(storage[index].timer) }
  }

  /// When the mode's timerfd should go off: the earliest `fireDate + tolerance` over every
  /// timer. Only timers whose fire date is before the best candidate so far can lower it, and
  /// the heap order lets whole subtrees past that point be skipped, so this visits just the
  /// timers inside the first timer's tolerance window.
  func wakeDeadline() -> LoopClock.Instant? {
    guard count > 0 else { return nil }
    let first = storage[0]
    let tolerance = first.reference._withUnsafeGuaranteedRef { $0.scheduledTolerance }
    var best = first.fireDate.advanced(nanoseconds: tolerance)
    if tolerance == 0 { return best }  // nothing can beat the earliest fire date
    var pending = [0]
    while let index = pending.popLast() {
      let entry = storage[index]
      if entry.fireDate > best { continue }
      let own = entry.reference._withUnsafeGuaranteedRef { $0.scheduledTolerance }
      best = min(best, entry.fireDate.advanced(nanoseconds: own))
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
    return min(first, count)..<min(first + TimerHeap.arity, count)
  }

  /// Adds an entry for `timer` (the heap's reference to it) and returns its index; recording
  /// that index in the timer's slot is the caller's.
  private func place(_ timer: LoopTimer, fireDate: LoopClock.Instant) -> Int {
    if count == capacity { grow() }
    count += 1
    return siftUp(Entry(fireDate: fireDate, reference: .passRetained(timer)), from: count - 1)
  }

  /// Fills the hole at `index` with the last entry and releases the heap's reference to the
  /// entry that was there (its timer's slot no longer points here).
  private func removeEntry(at index: Int) {
    let removed = storage[index].reference
    count -= 1
    if index < count { record(settle(storage[count], at: index)) }
    removed.release()
  }

  /// Puts `entry` in the hole at `index`, sifting it up or down as its key requires; returns
  /// where it ends (its own index is left for the caller to record).
  private func settle(_ entry: Entry, at index: Int) -> Int {
    if index > 0 && entry.precedes(storage[(index - 1) / TimerHeap.arity]) {
      return siftUp(entry, from: index)
    }
    return siftDown(entry, from: index)
  }

  /// Moves the hole at `start` towards the root while `entry` precedes the hole's parent; every
  /// entry moved down learns its new index. Stores `entry` where the hole ends.
  private func siftUp(_ entry: Entry, from start: Int) -> Int {
    var hole = start
    while hole > 0 {
      let parent = (hole - 1) / TimerHeap.arity
      guard entry.precedes(storage[parent]) else { break }
      storage[hole] = storage[parent]
      record(hole)
      hole = parent
      moveCount += 1
    }
    storage[hole] = entry
    return hole
  }

  /// Moves the hole at `start` towards the leaves while a child precedes `entry`.
  private func siftDown(_ entry: Entry, from start: Int) -> Int {
    var hole = start
    while true {
      let first = TimerHeap.arity * hole + 1
      if first >= count { break }
      let end = min(first + TimerHeap.arity, count)
      var smallest = first
      var child = first + 1
      while child < end {
        if storage[child].precedes(storage[smallest]) { smallest = child }
        child += 1
      }
      guard storage[smallest].precedes(entry) else { break }
      storage[hole] = storage[smallest]
      record(hole)
      hole = smallest
      moveCount += 1
    }
    storage[hole] = entry
    return hole
  }

  /// Stores `index` as the heap index of the timer now at `index`.
  private func record(_ index: Int) {
    storage[index].reference._withUnsafeGuaranteedRef { $0.slots.setIndex(index, in: self) }
  }

  /// Doubles the storage. Entries are plain values (a date and an unmanaged reference), so
  /// moving them is a byte copy.
  private func grow() {
    let (fresh, entries) = TimerHeap.allocate(capacity * 2)
    entries.moveInitialize(from: storage, count: count)
    allocation.deallocate()
    (allocation, storage, capacity) = (fresh, entries, capacity * 2)
  }

  /// Room for `capacity` entries after `lead` unused ones, the allocation line-aligned.
  private static func allocate(
    _ capacity: Int
  ) -> (UnsafeMutableRawPointer, UnsafeMutablePointer<Entry>) {
    let stride = MemoryLayout<Entry>.stride
    let allocation = UnsafeMutableRawPointer.allocate(
      byteCount: (capacity + lead) * stride, alignment: alignment)
    let entries = (allocation + lead * stride).bindMemory(to: Entry.self, capacity: capacity)
    return (allocation, entries)
  }
}
