import Glibc

extension IsolatedLoop {
  /// Watches a Unix signal in `mode`; as `SignalSource(signal:label:order:handler:)` followed
  /// by `loop.add(_:to:)`. The handler may capture and mutate this thread's state.
  /// - Throws: as `SignalSource`'s initialiser (SIGKILL, SIGSTOP and the synchronous faults
  ///   are refused, naming the signal) or as `loop.add(_:to:)`.
  @discardableResult
  public func addSignalSource(
    signal: Int32, label: String? = nil, order: Int = 0, to mode: Loop.Mode = .default,
    isolation: (any Actor)? = #isolation, _ handler: @escaping (Int) -> Void
  ) throws(LoopError) -> SignalSource {
    check("addSignalSource(signal:label:order:to:_:)", isolation)
    let source = try SignalSource(
      signal: signal, label: label, order: order, isolatedHandler: handler,
      releasesOnLoopThread: true)
    return try adding(source, invalidate: source.invalidate) { () throws(LoopError) in
      try loop.add(source, to: mode)
    }
  }

  /// Watches a child process to its exit in `mode`; as
  /// `ChildProcessSource(processID:label:handler:)` followed by `loop.add(_:to:)`. The handler
  /// runs once and may capture and mutate this thread's state.
  /// - Throws: as `ChildProcessSource`'s initialiser (a process that is not a child of this
  ///   one is refused) or as `loop.add(_:to:)`.
  @discardableResult
  public func addChildProcessSource(
    processID: pid_t, label: String? = nil, to mode: Loop.Mode = .default,
    isolation: (any Actor)? = #isolation,
    _ handler: @escaping (ChildProcessSource.Termination) -> Void
  ) throws(LoopError) -> ChildProcessSource {
    check("addChildProcessSource(processID:label:to:_:)", isolation)
    let source = try ChildProcessSource(
      processID: processID, label: label, isolatedHandler: handler, releasesOnLoopThread: true)
    return try adding(source, invalidate: source.invalidate) { () throws(LoopError) in
      try loop.add(source, to: mode)
    }
  }
}
