import Synchronization

/// Which callout a loop's thread is in, published for stall watches (`Loop.watchStalls`).
///
/// While a watch is set, the loop's thread brackets every callout with `begin`/`end` (each
/// phase reads `active` once, a relaxed load, to know), and nested runs push onto the stack:
/// the top entry is what runs now. A wait inside a published callout is bracketed too
/// (`waitBeginsIfPublished`), so a nested run asleep is not stuck. Progress is any begin, end
/// or wake; a stall is a stretch past a threshold without any, inside a callout. Callouts
/// that began before a watch was set, or earlier in the phase under way then, are not seen;
/// one published under a watch since cancelled still ends here.
final class CalloutBoard: @unchecked Sendable {  // `lock` guards all but `active`, `openCallouts`
  struct Entry {
    let callout: UInt64
    let kind: Loop.Stall.Kind
    let label: String?
    let mode: Loop.Mode
    let depth: Int
    let began: LoopClock.Instant
    /// The watches that reported it running, to be told of its end.
    var reportedTo: [Loop.StallWatch] = []

    func stall(at now: LoopClock.Instant, ended: Bool) -> Loop.Stall {
      Loop.Stall(
        kind: kind, label: label, mode: mode, depth: depth, duration: began.duration(to: now),
        hasEnded: ended, callout: callout)
    }
  }

  /// Mirrors `!watches.isEmpty`, so an unwatched loop checks it without the lock.
  let active = Atomic<Bool>(false)
  /// How many published callouts are under way: `entries.count`, kept for the loop's thread
  /// alone, which reads it without the lock (only a wait inside one is published).
  private(set) var openCallouts = 0
  private let lock = Lock.make()
  private var entries: [Entry] = []
  private var waiting = false
  private var lastProgress = LoopClock.Instant.now
  private var callouts: UInt64 = 0
  private var watches: [Loop.StallWatch] = []
  private var closed = false

  // MARK: The loop's thread

  func begin(_ kind: Loop.Stall.Kind, label: String?, mode: Loop.Mode, depth: Int) {
    let now = LoopClock.Instant.now
    openCallouts += 1
    lock.lock()
    callouts += 1
    entries.append(
      Entry(callout: callouts, kind: kind, label: label, mode: mode, depth: depth, began: now))
    lastProgress = now
    lock.unlock()
  }

  /// Ends the innermost callout; tells the watches that reported it how long it ran.
  func end() {
    let now = LoopClock.Instant.now
    openCallouts -= 1
    lock.lock()
    let entry = entries.popLast()
    lastProgress = now
    lock.unlock()
    guard let entry, !entry.reportedTo.isEmpty else { return }
    let stall = entry.stall(at: now, ended: true)
    for watch in entry.reportedTo { watch.tell(stall) }
  }

  /// Marks the loop asleep when it waits inside a published callout (a plain load otherwise,
  /// all an unwatched wait pays); returns whether it did, for `waitEnds`.
  @inline(__always)
  func waitBeginsIfPublished() -> Bool {
    guard openCallouts > 0 else { return false }
    lock.lock()
    waiting = true
    lock.unlock()
    return true
  }

  func waitEnds() {
    let now = LoopClock.Instant.now
    lock.lock()
    waiting = false
    lastProgress = now
    lock.unlock()
  }

  // MARK: The watches' threads

  /// Queues the report `watch` should make now, if any, and returns when it should look next;
  /// nil once the watch is no longer on the board (cancelled, or the loop's thread exited).
  func look(for watch: Loop.StallWatch, at now: LoopClock.Instant) -> LoopClock.Instant? {
    lock.withLock { () -> LoopClock.Instant? in
      guard watches.contains(where: { $0 === watch }) else { return nil }
      // Not in a callout, or asleep in a nested run: nothing can be stuck yet. A callout
      // that begins right after this look is at most `threshold` old at the next.
      guard let top = entries.indices.last, !waiting else {
        return now.advanced(by: watch.threshold)
      }
      let stuckUntil = lastProgress.advanced(by: watch.threshold)
      guard stuckUntil <= now else { return stuckUntil }
      guard !entries[top].reportedTo.contains(where: { $0 === watch }) else {
        return now.advanced(by: watch.threshold)
      }
      entries[top].reportedTo.append(watch)
      // Queued before the lock goes, so the callout's end (queued by `end` once it has the
      // lock) cannot be told first. The queue is the watch thread's; nothing that holds its
      // loop's lock takes this one.
      watch.tell(entries[top].stall(at: now, ended: false))
      return now.advanced(by: watch.threshold)
    }
  }

  /// Adds `watch`, or returns false once the loop's thread has exited.
  func add(_ watch: Loop.StallWatch) -> Bool {
    lock.withLock {
      guard !closed else { return false }
      watches.append(watch)
      active.store(true, ordering: .relaxed)
      return true
    }
  }

  func remove(_ watch: Loop.StallWatch) {
    lock.withLock {
      watches.removeAll { $0 === watch }
      active.store(!watches.isEmpty, ordering: .relaxed)
    }
  }

  /// Whether the loop's thread has exited (no watch can be added).
  var isClosed: Bool { lock.withLock { closed } }

  /// At the loop's teardown: no watch is added from now on; returns those there were.
  func close() -> [Loop.StallWatch] {
    lock.withLock {
      closed = true
      active.store(false, ordering: .relaxed)
      defer { watches = [] }
      return watches
    }
  }
}
