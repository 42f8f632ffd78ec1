extension VirtualLoop {
  /// What `runTask` throws when its task waits for something that can never come (nothing on
  /// the loop is ready, no timer lies ahead in the mode, and no other thread brought the loop
  /// anything for `waitingAtMost` of real time), or never ends while the clock keeps moving
  /// (`runningAtMost` of real time ran out). `runTask` cancels the task before it throws and
  /// lets the cancellation run, so a task that honours cancellation ends (`ended`).
  ///
  /// Typical causes: a continuation nobody resumes, a wait on a stream nobody feeds, work
  /// awaited from a thread that has stopped; or, for `.ranTooLong`, a repeating timer or a
  /// retry loop that never ends.
  ///
  /// Mirrors no CF type. The counterpart is swift-clocks' `TestClock.run(timeout:)` failing
  /// the test when sleeps are left after its real-time timeout.
  public struct TaskStalled: Error, Sendable, CustomStringConvertible {
    /// Why `runTask` gave up.
    public enum Reason: Sendable, Equatable {
      /// Nothing ready, no timer ahead, and nothing from another thread for this long.
      case nothingCame(Duration)
      /// The call's real-time budget (`runningAtMost`) ran out with the task still going:
      /// timers kept coming and the task never ended (a heartbeat, endless retries).
      case ranTooLong(Duration)
    }

    /// Why `runTask` gave up.
    public let reason: Reason
    /// The virtual now when it gave up.
    public let at: LoopClock.Instant
    /// How far the virtual clock had moved from its start.
    public let elapsed: Duration
    /// The mode `runTask` ran.
    public let mode: Loop.Mode
    /// Whether the task ended once cancelled (within a second of real time); if not, it is
    /// still suspended, and a job of it that reaches the loop after the `VirtualLoop` is
    /// released traps.
    public let ended: Bool

    /// What happened, where the clock was, and what to look at.
    public var description: String {
      let what: String
      switch reason {
      case .nothingCame(let waited):
        what =
          "the task waits for something that can never come. At t+\(elapsed) of virtual time "
          + "nothing on the loop is ready, no timer lies ahead in mode \"\(mode)\", and no other "
          + "thread brought the loop anything in \(waited) of real time. If it waits for "
          + "another thread (an actor on another loop, I/O, a Task.sleep timed off the loop), "
          + "give that longer with waitingAtMost:; if it waits on a continuation or stream "
          + "nobody resumes, that is what to fix. Sleep with loop.sleep or virtual.clock to "
          + "sleep in virtual time."
      case .ranTooLong(let budget):
        what =
          "the task was still going after \(budget) of real time, at t+\(elapsed) of virtual "
          + "time: timers kept coming in mode \"\(mode)\" and it never ended (a repeating timer "
          + "or a retry loop with no end?). Give it longer with runningAtMost:, or stop what "
          + "repeats."
      }
      return "VirtualLoop.runTask: " + what
        + (ended
          ? " The task was cancelled and ended."
          : " The task was cancelled but has not "
            + "ended; let it end before the VirtualLoop is released.")
    }
  }
}
