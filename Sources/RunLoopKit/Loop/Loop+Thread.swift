import Glibc

/// Which thread a loop belongs to, and checks that code runs there. CF has no public
/// counterpart beyond comparing `CFRunLoopGetCurrent()` with a loop; SwiftNIO's
/// `EventLoop.inEventLoop` and `preconditionInEventLoop()` are the model.
extension Loop {
  /// True on this loop's own thread (where `Loop.current === self`). Unlike comparing
  /// pthread_t values, never true on a later thread that got the same pthread_t after this
  /// one exited. False during the thread's exit, once its loop has been torn down.
  ///
  /// A `VirtualLoop`'s loop is current on the thread driving it and, between drives, on the
  /// thread that made it or drove it last.
  public var isCurrent: Bool {
    if let virtualClock { return virtualClock.isCurrentThread }
    if let mine = LoopRegistry.shared.existingLoop() { return mine === self }
    // `Loop.main` may have been made by another thread before the main thread asked for
    // it; the table still knows it (a torn-down loop has left the table).
    return LoopRegistry.shared.registeredLoop(for: pthread_self()) === self
  }

  /// Traps unless called on this loop's thread, with a message naming both threads and
  /// `what` was attempted. Use it at the top of code that touches state confined to the loop.
  public func preconditionIsCurrent(
    _ what: @autoclosure () -> String = "this code",
    file: StaticString = #fileID, line: UInt = #line
  ) {
    guard !isCurrent else { return }
    trapOffThread(
      what(),
      advice: "Hand the work to that thread with loop.perform { … } (or ResidentThread.run { … } "
        + "from async code).", file: file, line: line)
  }

  /// The trap of every "must run on this loop's thread" check: names both threads, then says
  /// what to do instead.
  func trapOffThread(
    _ what: String, advice: String, file: StaticString = #fileID, line: UInt = #line
  ) -> Never {
    // fatalError, not preconditionFailure: these checks guard thread-confined state, so they
    // must hold in -Ounchecked builds too.
    fatalError(
      "RunLoopKit: \(what) must run on the loop of \(threadDescription), but ran on "
        + "\(ThreadName.current). \(advice)", file: file, line: line)
  }

  /// "thread 20665 \"network\"": the owner's kernel id and, when it has one, its name (a
  /// resident thread's name), for messages and errors.
  public var threadDescription: String {
    if virtualClock != nil { return "a VirtualLoop's driving thread" }
    return ThreadName.describe(id: threadID, name: threadName)
  }

  /// Traps, saying what to do instead, unless called on the loop's own thread. The message
  /// is built only when the check fails (a run used to build it every time).
  @inline(__always)
  func requireOwnThread(for operation: @autoclosure () -> String) {
    if pthread_equal(pthread_self(), thread) != 0 { return }
    wrongThread(operation())
  }

  private func wrongThread(_ operation: String) -> Never {
    fatalError(
      """
      RunLoopKit: Loop.\(operation) was called on \(ThreadName.current), but this loop \
      belongs to \(threadDescription). A loop can only be run by its own thread: use Loop.current on \
      this thread, or send the work to that loop's thread with loop.perform { … }.
      """)
  }
}
