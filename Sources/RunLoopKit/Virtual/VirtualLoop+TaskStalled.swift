extension VirtualLoop {
  /// What `runTask` throws when its task waits for something that can never come: nothing on
  /// the loop is ready, no timer lies ahead in the mode (so moving the clock would change
  /// nothing), and no other thread brought the loop anything for `waited` of real time.
  /// `runTask` cancels the task before it throws, so a task that honours cancellation ends.
  ///
  /// Typical causes: a continuation nobody resumes, a wait on a stream nobody feeds, work
  /// awaited from a thread that has stopped, a sleep on a clock other than the loop's
  /// (`ContinuousClock().sleep` sleeps in real time, elsewhere).
  ///
  /// Mirrors no CF type. The counterpart is swift-clocks' `TestClock.run(timeout:)` failing
  /// the test when sleeps are left after its real-time timeout.
  public struct TaskStalled: Error, Sendable, CustomStringConvertible {
    /// The virtual now when the task stalled.
    public let at: LoopClock.Instant
    /// How far the virtual clock had moved from its start.
    public let elapsed: Duration
    /// The mode `runTask` ran.
    public let mode: Loop.Mode
    /// How long `runTask` waited in real time for another thread to bring something.
    public let waited: Duration

    /// What happened, where the clock was, and what to look at.
    public var description: String {
      "VirtualLoop.runTask: the task waits for something that can never come. At t+\(elapsed) "
        + "of virtual time nothing on the loop is ready, no timer lies ahead in mode "
        + "\"\(mode)\", and no other thread brought the loop anything in \(waited) of real "
        + "time; the task was cancelled. If it waits for another thread (an actor on another "
        + "loop, I/O, a Task.sleep timed off the loop), give that longer with "
        + "waitingAtMost:; if it waits on a continuation or stream nobody resumes, that is "
        + "what to fix. Sleep with loop.sleep or virtual.clock to sleep in virtual time."
    }
  }
}
