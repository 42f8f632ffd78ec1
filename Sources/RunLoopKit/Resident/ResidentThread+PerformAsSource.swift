/// `performAsSource` on a resident thread: `Loop.performAsSource` with the thread's refusal
/// rule, for Darwin code that sends `performSelector(_:on:with:waitUntilDone:modes:)` to a
/// long-lived thread.
extension ResidentThread {
  /// Queues `block` as the callout of a manual source in `mode` of the thread's loop (see
  /// `Loop.performAsSource(in:_:)`), so a run there with `returnAfterSourceHandled: true`
  /// returns `.handledSource` after it. The thread runs its loop in `.default`, so the default
  /// mode runs the block at once; a block for another mode waits for a run of that mode
  /// (a nested run in a block), and runs in the thread's final drain if none comes.
  ///
  /// Unlike `perform(_:)`, whose blocks run in every common mode after every block the caller
  /// posted before, these blocks keep their order among themselves only.
  ///
  /// Accepted until `stop()`: a block accepted before it runs, at the latest in the loop's
  /// final drain.
  /// - Throws: `LoopError.stopped` once `stop()` has been called (the block will not run);
  ///   `invalidMode` for a mode with no name.
  public func performAsSource(
    in mode: Loop.Mode = .default, _ block: sending @escaping () -> Void
  ) throws(LoopError) {
    try performAsSource(in: [mode], block)
  }

  /// Queues `block` for several modes; it runs once, in the first of them whose run gets to
  /// it. As `performAsSource(in:_:)` otherwise; an empty list throws `invalidArgument`.
  public func performAsSource(
    in modes: [Loop.Mode], _ block: sending @escaping () -> Void
  ) throws(LoopError) {
    try core.performAsSource(block, in: modes)
  }
}
