/// Adding, removing and finding signal sources and child-process sources. Safe from any
/// thread, like every other item.
extension Loop {
  // MARK: Signal sources

  /// Adds the signal source to `mode` (or to every common mode with `.common`). The first
  /// mode it joins installs the process-wide handler for its signal, if no other source has.
  /// Throws if it belongs to another loop or was invalidated, or when 256 signal sources are
  /// in modes already.
  public func add(_ source: SignalSource, to mode: Mode) throws(LoopError) {
    try addItem(source.source, to: mode)
  }
  /// Takes the source out of `mode` (out of every common mode with `.common`). Leaving its
  /// last mode stops the count; if it was the signal's last source, the disposition found
  /// before the first source was added is put back.
  public func remove(_ source: SignalSource, from mode: Mode) {
    removeItem(source.source, from: mode)
  }
  /// Whether the source is in `mode`; for `.common`, whether it was added to `.common`.
  public func contains(_ source: SignalSource, in mode: Mode) -> Bool {
    containsItem(source.source, in: mode)
  }

  // MARK: Child-process sources

  /// Adds the source to `mode` (or to every common mode with `.common`). A child that has
  /// ended already is reported on the next pass of that mode.
  public func add(_ source: ChildProcessSource, to mode: Mode) throws(LoopError) {
    try addItem(source.source, to: mode)
  }
  /// Takes the source out of `mode` (out of every common mode with `.common`) without
  /// invalidating it.
  public func remove(_ source: ChildProcessSource, from mode: Mode) {
    removeItem(source.source, from: mode)
  }
  /// Whether the source is in `mode`; for `.common`, whether it was added to `.common`.
  public func contains(_ source: ChildProcessSource, in mode: Mode) -> Bool {
    containsItem(source.source, in: mode)
  }
}
