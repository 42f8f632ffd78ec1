/// `performAsSource`: a block delivered through one of the loop's sources, for code ported from
/// Darwin, where `performSelector(_:on:with:waitUntilDone:modes:)` signals a version-0 source
/// on the target thread.
extension Loop {
  /// Queues `block` for `mode` (`.common`: every common mode) and wakes the loop; the block
  /// runs in a pass of that mode as the callout of a manual source (label
  /// "performAsSource"), so a run with `returnAfterSourceHandled: true` returns
  /// `.handledSource` after it — unlike `perform`, whose blocks are not sources. Blocks for
  /// one mode run in the order queued. A loop whose thread exits runs the blocks still
  /// queued first, as it runs `perform`'s.
  ///
  /// Mirrors Foundation's `perform(_:on:with:waitUntilDone:modes:)` without `waitUntilDone`
  /// (use `ResidentThread.performAndWait` for that). Differs from CF in that the source is
  /// RunLoopKit's own (one per mode, made on first use): `loop.modes` lists the modes it
  /// made.
  ///
  /// - Throws: as `perform(in:_:)`: `LoopError.invalidMode` for a mode with no name,
  ///   `LoopError.loopTornDown` once the loop's thread has exited.
  public func performAsSource(
    in mode: Mode = .default, _ block: sending @escaping () -> Void
  ) throws(LoopError) {
    try Loop.checkNamed(mode)
    try performAsSource(in: [mode], checked: block)
  }

  /// Queues `block` for several modes; it runs once, in the first of them whose run gets to
  /// it (the sources of the others then find nothing and count as handled once). As
  /// `performAsSource(in:_:)` otherwise; an empty list throws `invalidArgument`.
  public func performAsSource(
    in modes: [Mode], _ block: sending @escaping () -> Void
  ) throws(LoopError) {
    try Loop.checkRunnable(modes)
    try performAsSource(in: modes, checked: block)
  }

  private func performAsSource(
    in modes: [Mode], checked block: sending @escaping () -> Void
  ) throws(LoopError) {
    let sources = try sourcePerforms.enqueue(block, in: modes, on: self)
    for source in sources { source.signal() }
    wakeUp()
  }
}
