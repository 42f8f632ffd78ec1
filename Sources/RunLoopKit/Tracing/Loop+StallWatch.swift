/// `watchStalls`: what a program with a main loop uses to learn that the loop is stuck, told
/// on another thread while the stuck callout still runs.
extension Loop {
  /// Calls `handler` on a thread of its own when a callout of this loop (a block, an executor
  /// job, a timer, a source's or port's handler, an observer, the main queue) has run for
  /// `threshold` without the loop beginning or ending another callout or waiting in a nested
  /// run; once per callout, while it still runs (`hasEnded` false, `duration` so far), and
  /// once more when it returns (`hasEnded` true, `duration` its total), in that order, on the
  /// watch's thread. A callout that began before the watch was set (or earlier in the phase
  /// under way then) is not reported, nor the final drain's own at the thread's exit.
  /// Delayed blocks (`perform(after:)`) and `loop.sleep` are timers, labelled so. Time is
  /// real time, on a `VirtualLoop`'s loop too.
  ///
  /// A callout is first reported `threshold` after its last progress, give or take the
  /// watch thread's wake-up; a watch costs that thread one wake per `threshold` while the
  /// loop is idle or busy with short callouts, and the loop's thread two clock reads and two
  /// locks per callout (see the bench's `--only tracer` row). Without a watch a pass pays one
  /// relaxed load per phase and a plain one per wait. Several watches may be set on one loop.
  ///
  /// - Returns: the watch; it lasts until its `cancel()` or the loop's thread exits.
  /// - Throws: `LoopError.invalidArgument` for a threshold not greater than zero,
  ///   `.loopTornDown` once the loop's thread has exited, what starting a thread throws.
  @discardableResult
  public func watchStalls(
    longerThan threshold: Duration, _ handler: @escaping @Sendable (Stall) -> Void
  ) throws(LoopError) -> StallWatch {
    guard threshold > .zero else {
      throw .invalidArgument(
        name: "watchStalls(longerThan:)", value: "\(threshold)",
        reason: "a stall threshold must be greater than zero")
    }
    let thread = try ResidentThread(name: "stall watch")
    let watch = StallWatch(
      threshold: threshold, board: calloutBoard, thread: thread, handler: handler)
    guard calloutBoard.add(watch) else {
      watch.cancel()
      throw .loopTornDown(thread: threadDescription)
    }
    do {
      try watch.start()
    } catch {
      watch.cancel()
      // The loop's teardown, between the add and the start, stopped the watch's thread.
      throw calloutBoard.isClosed ? .loopTornDown(thread: threadDescription) : error
    }
    return watch
  }

  /// Whether a phase publishes its callouts on `calloutBoard`: asked once per phase, like
  /// `traceSink` (a Bool, not the board, so the phase holds no reference to release).
  @inline(__always)
  func watchingStalls() -> Bool { calloutBoard.active.load(ordering: .relaxed) }
}

extension DescriptorSource {
  /// What a stall report calls this source's callout.
  var stallKind: Loop.Stall.Kind {
    if isMainQueue { return .mainQueue }
    return isPort ? .port : .descriptor(fd: fileDescriptor)
  }

  /// The label a stall report gives: the main queue's source is named by its kind alone.
  var stallLabel: String? { isMainQueue ? nil : label }
}
