import Synchronization

extension Loop {
  /// A watch on a loop's callouts (`Loop.watchStalls(longerThan:_:)`): a thread of its own,
  /// named `stall watch`, looks at the loop's published callout when a stall could first be
  /// due, and calls the handler there.
  ///
  /// No CFRunLoop counterpart (see `Loop.Stall`). The watch lasts until `cancel()` or until
  /// the loop's thread exits; dropping the handle does not end it.
  public final class StallWatch: Sendable {
    /// How long a callout runs, without the loop beginning or ending another one or waiting
    /// in a nested run, before it is reported.
    public let threshold: Duration
    /// Cleared by `cancel()`: reports still queued then call nothing, and a handler that
    /// captured its own watch (to cancel it) no longer keeps it alive.
    private let handler: Mutex<(@Sendable (Loop.Stall) -> Void)?>
    private let board: CalloutBoard
    private let thread: ResidentThread

    init(
      threshold: Duration, board: CalloutBoard, thread: ResidentThread,
      handler: @escaping @Sendable (Loop.Stall) -> Void
    ) {
      self.threshold = threshold
      self.board = board
      self.thread = thread
      self.handler = Mutex(handler)
    }

    deinit {
      // The last reference may go on the watched loop's thread (at its teardown, or when a
      // callout a dropped watch reported ends): the thread handle must not join there, since
      // the handler may be waiting for that very thread.
      thread.stop()
      thread.core.detach()
    }

    /// Ends the watch: once it returns the handler is not called again. Called on another
    /// thread than the watch's, it first lets the reports already made reach the handler and
    /// waits for them, so calling it from one of the watched loop's callouts while the
    /// handler waits for that loop would deadlock. Called from the handler itself, it returns
    /// at once, and reports not yet delivered are dropped.
    public func cancel() {
      board.remove(self)
      thread.stop()
      // Its own thread, in the handler or in the thread's exit (where `isCurrent` is false).
      if thread.isCurrent || thread.core.isOwnPthread {
        thread.core.detach()
      } else {
        try? thread.join()
      }
      handler.withLock { $0 = nil }
    }

    /// Starts looking, on the watch's thread: a timer that fires when a stall could first
    /// be due, and is put off to the next such date each time.
    func start() throws(LoopError) {
      let threshold = threshold
      do {
        try thread.performAndWait { [weak self] () throws -> Void in
          let timer = try LoopTimer(
            label: "stall check", after: threshold, repeating: threshold
          ) { timer in self?.look(timer) }
          try Loop.current.add(timer, to: .default)
        }
      } catch let error as LoopError {
        throw error
      } catch {
        throw .stopped(thread: thread.name)  // performAndWait throws nothing else here
      }
    }

    private func look(_ timer: LoopTimer) {
      guard let next = board.look(for: self, at: .now) else {
        timer.invalidate()
        return
      }
      timer.fireDate = next
    }

    /// Calls the handler on the watch's thread. Reports of running callouts and of ends take
    /// the same queue, so they arrive in the order they were made: the end of one callout
    /// before the report of the next, however late the watch's thread is.
    func tell(_ stall: Loop.Stall) {
      try? thread.perform { [self] in handler.withLock { $0 }?(stall) }
    }

    /// At the loop's teardown: the thread ends (no join: see `deinit`) once it has told the
    /// reports already queued, and then lets the handler go, so that a handler holding its
    /// own watch does not keep the two alive.
    func loopEnded() {
      try? thread.perform { [self] in handler.withLock { $0 = nil } }
      thread.stop()
      thread.core.detach()
    }
  }
}
