import Glibc
import Synchronization

extension Loop {
  /// The blocks posted to a loop and not yet taken by it: a queue that posters claim a slot
  /// in with one compare-and-swap, without the loop's lock, and that the loop's thread
  /// empties in its drains. CF keeps its perform blocks in a list under the loop's
  /// lock, and so did this loop until four threads posting to it on two CPUs showed what
  /// that costs there: a poster preempted while it held the lock stalled every other poster
  /// until it ran again (rounds at 0.6–0.8× the rate of a C mutex queue). Here a preempted
  /// poster holds up no other poster; at worst the loop waits for the one block it claimed.
  ///
  /// The slots are in blocks of 63, chained, so the loop reads them in order from contiguous
  /// memory (a linked node per post made the loop chase one cache miss per block: half the
  /// rate). The design is crossbeam's `SegQueue` cut down to one consumer:
  /// - `tail` counts positions: 63 slots per block, then one that stands for "the next block
  ///   is being installed", which posters wait out. The poster that claims a block's last slot
  ///   installs the next (taken from `spare` or allocated before its claim, so the wait is
  ///   short). Its low bits hold the refusals, so a post is refused or accepted atomically
  ///   with the change that refuses it: the loop's exit (`closed`) and a resident thread's
  ///   stop (`residentStopped`).
  /// - A slot's `written` flag says the poster finished writing it; the loop takes slots in
  ///   order, written ones only.
  /// - Waking: a poster that finds the loop asleep (`Loop.asleep`) after writing its slot wakes
  ///   it. The loop, having said it sleeps, looks at its next slot once more before it does
  ///   (`hasWaiting`). Both sides store, then load, sequentially consistent, so at least one of
  ///   them sees the other: a post is never left behind a sleeping loop.
  ///
  /// One thread takes blocks out: the loop's own (its drains, and its exit). It moves the
  /// head under the loop's lock, so other threads may look at what waits (`mayContain`,
  /// `waitingCount`) while holding that lock; it reads the head without the lock, as nobody
  /// else writes it. A drain first waits until every slot claimed before it began is written
  /// (`waitForWrites`), so a block whose `perform` returned is never left behind a claim
  /// still being written: the poster of that claim is between two instructions, or preempted
  /// there, and only the loop waits for it, never another poster.
  final class PostQueue: @unchecked Sendable {  // head guarded by the loop's lock; rest atomics
    /// Why posts are refused, kept in the low bits of `tail`.
    struct Refusals: OptionSet, Sendable {
      let rawValue: UInt
      /// The loop's thread has exited or is taking the last blocks itself: no post is taken.
      static let closed = Refusals(rawValue: 1)
      /// A resident thread was stopped: its own `perform` is refused from now on.
      static let residentStopped = Refusals(rawValue: 2)
      static let mask: UInt = 3
      static let bits = 2
    }

    /// A run of slots and the link to the next run: one page, a cache line per slot (the
    /// block, then the flag that says its poster finished writing it), so a poster and the
    /// loop share no line but the slot one hands to the other; the last line holds the link.
    /// Raw memory, retained by nobody: a class instance cost a retain and release on every
    /// post, and an `InlineArray` of atomic flags was made and destroyed element by element
    /// through generic code (~12 000 instructions per block, in callgrind).
    struct Block {
      static let capacity = 63
      private static let lineSize = 64
      private static let flagOffset = 56
      let base: UnsafeMutableRawPointer

      init(_ address: UInt) { base = UnsafeMutableRawPointer(bitPattern: address)! }

      var address: UInt { UInt(bitPattern: base) }

      /// A new block with no slot written.
      static func make() -> UInt {
        precondition(MemoryLayout<QueuedBlock>.size <= flagOffset, "a block must fit its slot")
        let base = UnsafeMutableRawPointer.allocate(
          byteCount: lineSize * (capacity + 1), alignment: lineSize)
        for index in 0..<capacity {
          (base + lineSize * index + flagOffset).bindMemory(to: Atomic<Bool>.self, capacity: 1)
            .initialize(to: Atomic(false))
        }
        (base + lineSize * capacity).bindMemory(to: Atomic<UInt>.self, capacity: 1)
          .initialize(to: Atomic(0))
        return UInt(bitPattern: base)
      }

      /// Frees the block; its slots hold no block.
      func free() { base.deallocate() }

      /// Slot `index`'s block, for a poster to write.
      func emptyValue(_ index: Int) -> UnsafeMutablePointer<QueuedBlock> {
        (base + Block.lineSize * index).bindMemory(to: QueuedBlock.self, capacity: 1)
      }

      /// Slot `index`'s block, written.
      func value(_ index: Int) -> UnsafeMutablePointer<QueuedBlock> {
        (base + Block.lineSize * index).assumingMemoryBound(to: QueuedBlock.self)
      }

      func written(_ index: Int) -> UnsafeMutablePointer<Atomic<Bool>> {
        (base + Block.lineSize * index + Block.flagOffset).assumingMemoryBound(
          to: Atomic<Bool>.self)
      }

      /// The next block's address, set by the poster that claimed this block's last slot
      /// before it writes that slot.
      var next: UnsafeMutablePointer<Atomic<UInt>> {
        (base + Block.lineSize * Block.capacity).assumingMemoryBound(to: Atomic<UInt>.self)
      }

      /// Empties the flags for reuse; the values were all moved out.
      func reset() {
        for index in 0..<Block.capacity { written(index).pointee.store(false, ordering: .relaxed) }
        next.pointee.store(0, ordering: .relaxed)
      }
    }

    /// Positions per block: its slots, then the one that stands for installing the next.
    private static var lap: UInt { UInt(Block.capacity + 1) }

    /// Claimed positions (shifted past the refusal bits) and the refusals.
    private let tail = Atomic<UInt>(0)
    /// The block the tail's position is in (the last one installed).
    private let tailBlock: Atomic<UInt>
    /// A block the loop emptied, for the next install; 0 when there is none.
    private let spare = Atomic<UInt>(0)
    /// The position of the next slot to take, and its block: guarded by the loop's lock.
    @exclusivity(unchecked) private var headPosition: UInt = 0
    @exclusivity(unchecked) private var headBlock: UInt
    /// `headPosition` for a loop that spins and may not take the lock on every turn.
    private let takenUpTo = Atomic<UInt>(0)

    init() {
      let first = Block.make()
      tailBlock = Atomic(first)
      headBlock = first
    }

    deinit {
      // Posters keep the loop (and so the queue) alive while they post: every claimed slot is
      // written by now.
      _ = take(before: claimed) { $0.deinitialize(count: 1) }
      var block = headBlock
      while block != 0 {
        let next = Block(block).next.pointee.load(ordering: .acquiring)
        Block(block).free()
        block = next
      }
      let kept = spare.load(ordering: .acquiring)
      if kept != 0 { Block(kept).free() }
    }

    /// Queues `queued` unless one of `refusing` is in force, and returns whether it did (or
    /// the refusals that stopped it). `setting` is added to the refusals by the same claim (a
    /// resident thread's stop block refuses the thread's posts after it).
    func push(
      _ queued: consuming QueuedBlock, refusing: Refusals, setting: Refusals = []
    ) -> Refusals? {
      var installing: UInt = 0  // the next block, when this post may claim a last slot
      var waits = 0
      var word = tail.load(ordering: .acquiring)
      while true {
        let refusals = Refusals(rawValue: word & Refusals.mask)
        if !refusals.isDisjoint(with: refusing) {
          if installing != 0 { keepSpare(installing) }
          return refusals
        }
        let position = word >> Refusals.bits
        let offset = Int(position % Self.lap)
        if offset == Block.capacity {
          // Another poster is installing the next block, a few instructions away unless it
          // was preempted: let it run.
          Self.pause(&waits)
          word = tail.load(ordering: .acquiring)
          continue
        }
        if offset == Block.capacity - 1 && installing == 0 { installing = takeSpareOrMake() }
        // Read before the claim: a claim that succeeds proves the tail stayed in this block.
        let block = tailBlock.load(ordering: .acquiring)
        let claimed = ((position + 1) << Refusals.bits) | refusals.rawValue | setting.rawValue
        let (exchanged, found) = tail.compareExchange(
          expected: word, desired: claimed, successOrdering: .acquiringAndReleasing,
          failureOrdering: .acquiring)
        guard exchanged else {
          word = found
          continue
        }
        let slots = Block(block)
        if offset == Block.capacity - 1 {
          // The last slot: link the next block before this slot is written (the loop follows
          // the link once it has taken this slot), then move the tail on into it. Refusals
          // added meanwhile stay: the add leaves the low bits alone.
          slots.next.pointee.store(installing, ordering: .releasing)
          tailBlock.store(installing, ordering: .releasing)
          tail.wrappingAdd(1 << UInt(Refusals.bits), ordering: .releasing)
          installing = 0
        }
        TestPausePoint.reach(.postClaimed, by: self)
        slots.emptyValue(offset).initialize(to: consume queued)
        slots.written(offset).pointee.store(true, ordering: .sequentiallyConsistent)
        // After the write: the loop may be waiting for it (`waitForWrites`).
        if installing != 0 { keepSpare(installing) }
        return nil
      }
    }

    /// Adds `refusals` to those in force.
    func refuse(_ refusals: Refusals) {
      tail.bitwiseOr(refusals.rawValue, ordering: .acquiringAndReleasing)
    }

    /// With the loop's lock held: refuses every later post if no post was claimed since the
    /// last take; false (and nothing changed) when one was, written or not yet.
    func closeIfEmpty() -> Bool {
      var word = tail.load(ordering: .acquiring)
      while word >> Refusals.bits == headPosition {
        let (exchanged, found) = tail.compareExchange(
          expected: word, desired: word | Refusals.closed.rawValue,
          ordering: .acquiringAndReleasing)
        if exchanged { return true }
        word = found
      }
      return false
    }

    /// With the loop's lock held: whether the next slot to take is written. Sequentially
    /// consistent, for the loop that has just said it sleeps (see the type).
    var hasWaiting: Bool {
      let offset = Int(headPosition % Self.lap)
      return Block(headBlock).written(offset).pointee.load(ordering: .sequentiallyConsistent)
    }

    /// Without the lock, for a spinning loop: whether a post was claimed since the loop last
    /// took blocks (it may not be written yet: the drain waits for it).
    var mayHaveWaiting: Bool {
      tail.load(ordering: .relaxed) >> Refusals.bits != takenUpTo.load(ordering: .relaxed)
    }

    /// The position after the last claimed slot: a drain takes what was claimed before the
    /// value it read here when it began.
    var claimed: UInt { tail.load(ordering: .acquiring) >> Refusals.bits }

    /// With the loop's lock held, from any thread: whether a block waiting in the queue may
    /// satisfy `predicate`. A slot claimed and not yet written counts as one that does: its
    /// block is accepted, and the next drain will wait for it.
    func mayContain(where predicate: (borrowing QueuedBlock) -> Bool) -> Bool {
      var found = false
      visitClaims(before: claimed) { slots, offset in
        let written = slots.written(offset).pointee.load(ordering: .acquiring)
        found = written ? predicate(slots.value(offset).pointee) : true
        return !found
      }
      return found
    }

    /// With the loop's lock held, from any thread: how many blocks were claimed and not yet
    /// taken, written or not.
    var waitingCount: Int {
      var count = 0
      visitClaims(before: claimed) { _, _ in
        count += 1
        return true
      }
      return count
    }

    /// On the loop's thread, without the lock: returns once every slot claimed before `end`
    /// is written. A poster writes its slot a few instructions after claiming it, unless it
    /// was preempted in between: the loop then lets it run.
    func waitForWrites(before end: UInt) {
      var waits = 0
      visitClaims(before: end) { slots, offset in
        while !slots.written(offset).pointee.load(ordering: .acquiring) {
          TestPausePoint.reach(.drainWaitsForClaim, by: self)
          Self.pause(&waits)
        }
        return true
      }
    }

    /// Calls `visit` with each slot claimed before `end` and not taken (its block and its
    /// index there), in order, until it returns false. A block is linked before its last slot
    /// is written, so a walk that finds the next block not linked yet ends there: that slot
    /// is not written (a walk that waits for each slot never finds it so).
    @inline(__always)
    private func visitClaims(before end: UInt, _ visit: (Block, Int) -> Bool) {
      var position = headPosition
      var slots = Block(headBlock)
      while position < end {
        let offset = Int(position % Self.lap)
        if offset == Block.capacity {
          let next = slots.next.pointee.load(ordering: .acquiring)
          guard next != 0 else { return }
          slots = Block(next)
          position += 1
          continue
        }
        guard visit(slots, offset) else { return }
        position += 1
      }
    }

    /// Lets another thread run: a few turns of spinning, then yields, then short sleeps (a
    /// thread preempted for its whole time slice, or one of lower priority, is not starved).
    static func pause(_ waits: inout Int) {
      waits += 1
      if waits < 16 { return }
      if waits < 64 {
        sched_yield()
      } else {
        usleep(20)
      }
    }

    /// On the loop's thread, with the loop's lock held: moves the written blocks claimed
    /// before `end` (a `claimed` read earlier), in the order posted, to the end of `queue`;
    /// stops at the first slot not written yet (`waitForWrites` first to take them all).
    /// Returns how many.
    @discardableResult
    func take(appendingTo queue: inout [QueuedBlock], before end: UInt) -> Int {
      take(before: end) { queue.append($0.move()) }
    }

    /// On the loop's thread, with the loop's lock held: as `take(appendingTo:before:)`, into a
    /// drain's batch (room for `claims(before: end)` blocks made first).
    @discardableResult
    func take(into batch: DrainBatch, before end: UInt) -> Int {
      take(before: end) { batch.append(moving: $0) }
    }

    /// With the loop's lock held: how many slots were claimed before `end` and not taken (an
    /// upper bound: a position per block stands for no slot).
    func claims(before end: UInt) -> Int { Int(end - headPosition) }

    @inline(__always)
    private func take(before end: UInt, _ take: (UnsafeMutablePointer<QueuedBlock>) -> Void) -> Int
    {
      // The head in locals, written back once: this loop runs once per block a drain takes.
      var position = headPosition
      var slots = Block(headBlock)
      var count = 0
      while true {
        let offset = Int(position % Self.lap)
        if offset == Block.capacity {
          // Linked before the last slot was written, which was taken just now. (Followed
          // whatever `end` says: the head never rests here.)
          let emptied = slots
          slots = Block(emptied.next.pointee.load(ordering: .acquiring))
          position += 1
          emptied.reset()
          keepSpare(emptied.address)
          continue
        }
        guard position < end, slots.written(offset).pointee.load(ordering: .acquiring) else {
          break
        }
        take(slots.value(offset))
        position += 1
        count += 1
      }
      headPosition = position
      headBlock = slots.address
      takenUpTo.store(position, ordering: .relaxed)
      return count
    }

    private func takeSpareOrMake() -> UInt {
      let kept = spare.exchange(0, ordering: .acquiring)
      return kept != 0 ? kept : Block.make()
    }

    /// Keeps an empty block for the next install, or lets it go if one is kept already.
    private func keepSpare(_ block: UInt) {
      let previous = spare.exchange(block, ordering: .acquiringAndReleasing)
      if previous != 0 { Block(previous).free() }
    }
  }
}
