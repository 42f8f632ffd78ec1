extension Loop {
  /// The blocks one drain took out of the post queue, in a plain buffer the loop keeps between
  /// drains. An array cost the drain a uniqueness and capacity check per block taken, and,
  /// to run its blocks moving each out, a stand-in left in every slot or a reversal first
  /// (callgrind, 200 000 posts: ~60 instructions a block); a buffer is filled and emptied in
  /// order with nothing left behind. Only the loop's thread touches it.
  final class DrainBatch {
    // One thread only: the runtime's exclusivity checks would cost more than the moves.
    @exclusivity(unchecked) private var base: UnsafeMutablePointer<QueuedBlock>
    @exclusivity(unchecked) private(set) var count = 0
    @exclusivity(unchecked) private(set) var capacity: Int

    init(capacity: Int = 64) {
      base = .allocate(capacity: capacity)
      self.capacity = capacity
    }

    deinit {
      base.deinitialize(count: count)
      base.deallocate()
    }

    /// Makes room for `more` blocks beyond those held.
    func reserve(_ more: Int) {
      let needed = count + more
      guard needed > capacity else { return }
      let grown = max(needed, capacity * 2)
      let fresh = UnsafeMutablePointer<QueuedBlock>.allocate(capacity: grown)
      fresh.moveInitialize(from: base, count: count)
      base.deallocate()
      base = fresh
      capacity = grown
    }

    /// Moves the block at `slot` in, after those held; room was reserved.
    @inline(__always)
    func append(moving slot: UnsafeMutablePointer<QueuedBlock>) {
      precondition(count < capacity, "a drain took more blocks than it made room for")
      (base + count).moveInitialize(from: slot, count: 1)
      count += 1
    }

    func allApply(to target: QueuedBlock.Target) -> Bool {
      for index in 0..<count where !base[index].applies(to: target) { return false }
      return true
    }

    /// Runs every block held, in order, moving each out first so that it is released right
    /// after it ran (what it captured goes before the next block runs). Leaves the batch empty.
    func runAll(on loop: Loop, in mode: Mode) {
      let held = count
      count = 0
      // Asked here rather than by the drain, whose prologue then stays as small as it was.
      if loop.watchingStalls() {
        runPublishing(held, on: loop, to: loop.calloutBoard, in: mode)
        return
      }
      for index in 0..<held { (base + index).move().run(on: loop) }
    }

    /// `runAll` with each block published as a callout for stall watches.
    private func runPublishing(_ held: Int, on loop: Loop, to board: CalloutBoard, in mode: Mode) {
      let depth = loop.frames.count
      for index in 0..<held {
        let block = (base + index).move()
        board.begin(block.isExecutorJob ? .job : .block, label: nil, mode: mode, depth: depth)
        block.run(on: loop)
        board.end()
      }
    }

    /// Appends `blocks`, in order (a drain that had to sort its blocks out puts back those
    /// that run now).
    func append(contentsOf blocks: consuming [QueuedBlock]) {
      reserve(blocks.count)
      for block in blocks {
        (base + count).initialize(to: block)
        count += 1
      }
    }

    /// Hands the blocks held over as an array, in order, and leaves the batch empty.
    func moveToArray() -> [QueuedBlock] {
      let held = count
      // An empty batch makes no array: `Array(unsafeUninitializedCapacity: 0)` hands out the
      // standard library's one shared empty storage and writes its count there, a data race
      // between any two threads that do it (ThreadSanitizer reported it once per drain).
      guard held > 0 else { return [] }
      count = 0
      return [QueuedBlock](unsafeUninitializedCapacity: held) { buffer, initialized in
        buffer.baseAddress!.moveInitialize(from: base, count: held)
        initialized = held
      }
    }
  }
}
