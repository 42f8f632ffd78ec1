/// Which modes a loop has. Mirrors `CFRunLoopCopyAllModes`.
extension Loop {
  /// The loop's modes: `.default` first, then every other mode in the order it was made — by
  /// the first item added to it, by `addCommonMode`, or by anything else that needs its state
  /// (a block queued for a mode makes none). Running a mode that has nothing does not make it,
  /// as in CF. A mode, once made, stays for the loop's life. Safe from any thread.
  ///
  /// Differs from CF, whose array follows its internal set's undocumented order, in that the
  /// order is defined: a "run every mode" loop (run each for a moment, as a rescue loop does
  /// on Darwin) visits them the same way every time.
  public var modes: [Mode] {
    lock.withLock { [.default] + modesMade.filter { $0 != .default } }
  }
}
