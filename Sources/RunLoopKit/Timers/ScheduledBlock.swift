import Synchronization

/// The handle of a block queued with `perform(after:)` or `perform(at:)`: it can cancel the
/// block from any thread and tells what became of it. Plays the part of SwiftNIO's
/// `Scheduled`, or of keeping the `CFRunLoopTimer` behind a one-shot delayed call to
/// invalidate it later.
///
/// Exactly one of three things happens to the block, decided by one atomic compare-and-swap:
/// it runs (once), it is cancelled (`cancel()` returned true), or it is abandoned because the
/// loop's thread exited before its time came. A `cancel()` racing the run either prevents it
/// or reports that it ran — never both, never neither.
public final class ScheduledBlock: Sendable {
  /// What became of the block, so far.
  public enum State: UInt8, Sendable, CustomStringConvertible {
    /// Waiting for its time (or for its loop to run one of its modes).
    case pending = 0
    /// It has started on the loop's thread (and may have finished).
    case ran = 1
    /// `cancel()` stopped it before it started; it will never run.
    case cancelled = 2
    /// The loop's thread exited before it was due; it will never run.
    case abandoned = 3

    /// The case name.
    public var description: String {
      switch self {
      case .pending: "pending"
      case .ran: "ran"
      case .cancelled: "cancelled"
      case .abandoned: "abandoned"
      }
    }
  }

  /// When the block becomes due.
  public let deadline: LoopClock.Instant
  let outcome: Outcome
  /// The one-shot timer that runs the block; `cancel()` invalidates it, which releases the
  /// block and whatever it captured.
  let timer: LoopTimer

  init(deadline: LoopClock.Instant, outcome: Outcome, timer: LoopTimer) {
    self.deadline = deadline
    self.outcome = outcome
    self.timer = timer
  }

  /// What became of the block so far. Safe from any thread.
  public var state: State { outcome.state }

  /// Cancels the block if it has not started. Safe from any thread, including the loop's.
  ///
  /// - Returns: true when the block will not run — it was cancelled now, or earlier, or the
  ///   loop's thread exited first; false when it has already started (or finished).
  @discardableResult
  public func cancel() -> Bool {
    guard outcome.claim(.cancelled) else { return state != .ran }
    timer.invalidate()
    return true
  }

  /// The block's fate, decided once: pending moves to exactly one of the other states.
  final class Outcome: Sendable {
    private let raw = Atomic<UInt8>(State.pending.rawValue)

    init() {}

    var state: State { State(rawValue: raw.load(ordering: .acquiring))! }

    /// Moves pending → `final`; true for the one caller that wins.
    func claim(_ final: State) -> Bool {
      raw.compareExchange(
        expected: State.pending.rawValue, desired: final.rawValue,
        ordering: .acquiringAndReleasing
      ).exchanged
    }
  }

  /// Lives in the timer's handler and dies with it: when the handler is released without
  /// having run the block (the loop tore the timer down), the block is marked abandoned.
  final class AbandonWatch: Sendable {
    let outcome: Outcome
    init(_ outcome: Outcome) { self.outcome = outcome }
    deinit { _ = outcome.claim(.abandoned) }
  }
}
