import Synchronization

/// The blocks `Loop.performAsSource` queued, and the manual source per mode that delivers them.
///
/// Foundation's `perform(_:on:with:waitUntilDone:modes:)` queues the selector on the target
/// thread and signals a version-0 source there, so a run with `returnAfterSourceHandled`
/// returns after it. Here each mode named gets one manual source (made and added on first
/// use, `.common` included); a block given several modes is queued in each and runs once, in
/// the first of them whose source is performed. Blocks of one mode run in the order queued.
///
/// Lock order: this queue's mutex, then the loop's lock (adding a source); the sources'
/// callouts run with no lock held and take the mutex only to take their blocks.
final class SourcePerformQueue: Sendable {
  /// One queued block: taken once, by whichever of its modes' sources gets to it first.
  final class Entry: Sendable {
    /// When it was queued, for the final drain's order across modes.
    let sequence: UInt64
    private let block: Mutex<(() -> Void)?>

    init(_ block: sending @escaping () -> Void, sequence: UInt64) {
      self.block = Mutex(block)
      self.sequence = sequence
    }

    /// The block, once; nil after.
    func take() -> (() -> Void)? {
      block.withLock { stored -> sending (() -> Void)? in
        let taken = stored
        stored = nil
        return taken
      }
    }
  }

  private struct Target {
    let source: ManualSource
    var entries: [Entry] = []
  }

  private struct State {
    var targets: [Loop.Mode: Target] = [:]
    /// Set by the loop's final drain once a round found nothing: later blocks are refused.
    var closed = false
  }

  private let state = Mutex(State())
  private let sequences = Atomic<UInt64>(0)

  /// Queues `block` for each of `modes` (adding the mode's source on first use) and returns
  /// the sources to signal. Throws `loopTornDown` once the loop's final drain has closed the
  /// queue, and what adding a source throws.
  func enqueue(
    _ block: sending @escaping () -> Void, in modes: [Loop.Mode], on loop: Loop
  ) throws(LoopError) -> [ManualSource] {
    let entry = Entry(block, sequence: sequences.add(1, ordering: .relaxed).newValue)
    return try state.withLock { (state) throws(LoopError) -> [ManualSource] in
      if state.closed { throw .loopTornDown(thread: loop.threadDescription) }
      // Every mode's source first, then the block into each queue: an add that throws
      // leaves the block in no queue, so a call that throws never runs its block.
      var sources: [ManualSource] = []
      for mode in modes {
        if let known = state.targets[mode] {
          sources.append(known.source)
          continue
        }
        let source = ManualSource(label: "performAsSource") { [unowned self] in
          self.runEntries(for: mode)
        }
        try loop.add(source, to: mode)
        state.targets[mode] = Target(source: source)
        sources.append(source)
      }
      for mode in modes { state.targets[mode]?.entries.append(entry) }
      return sources
    }
  }

  /// The callout of `mode`'s source: runs the blocks queued for it, in order, each unless
  /// another mode's source ran it first. The source leaves the mode with its last block, as
  /// a block queued with `perform` stops counting once run: a mode is kept alive by
  /// `performAsSource` only while a block waits (the next call adds a source again).
  private func runEntries(for mode: Loop.Mode) {
    let (entries, source) = state.withLock { state -> ([Entry], ManualSource?) in
      guard let target = state.targets.removeValue(forKey: mode) else { return ([], nil) }
      return (target.entries, target.source)
    }
    // Outside the mutex, as every other callout of the loop: invalidating takes the loop's
    // lock (the order mutex → loop lock is the enqueue's, but nothing needs both here).
    source?.invalidate()
    for entry in entries { entry.take()?() }
  }

  /// For the final drain: takes and runs every block still queued, whatever its mode, in
  /// the order queued. Returns whether any ran.
  func runAllBeforeExit() -> Bool {
    let entries = state.withLock { state -> [Entry] in
      var all: [Entry] = []
      for (mode, var target) in state.targets where !target.entries.isEmpty {
        all += target.entries
        target.entries = []
        state.targets[mode] = target
      }
      return all.sorted { $0.sequence < $1.sequence }
    }
    var ran = false
    for entry in entries {
      if let block = entry.take() {
        block()
        ran = true
      }
    }
    return ran
  }

  /// For the final drain, once a round found nothing to do: refuses later blocks, unless one
  /// arrived meanwhile (then false: the drain goes round again to run it).
  func closeIfEmpty() -> Bool {
    state.withLock { state in
      guard state.targets.values.allSatisfy({ $0.entries.isEmpty }) else { return false }
      state.closed = true
      return true
    }
  }
}
