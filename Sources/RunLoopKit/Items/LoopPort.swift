/// A typed message queue that wakes its loop: the Linux stand-in for a Mach port
/// (`CFMachPort`/`NSMachPort`) used as a run loop source.
///
/// `send(_:)` appends a message and, when the queue was idle, writes the port's own eventfd;
/// that fd sits in the loop's epoll sets like any descriptor source, so a send wakes a
/// sleeping loop and the handler receives every message, in the order sent, on the loop's
/// thread. A burst of sends costs one eventfd write. Handling a port counts as handling a
/// source (it is a version-1 source).
///
/// Differences from CF: the messages are Swift values rather than Mach messages, and a port
/// added to a loop stays there until removed or invalidated even when you drop your
/// reference, which makes `LoopPort<Never>` the library's "keep the thread alive" source.
public final class LoopPort<Message: Sendable>: Sendable {
  let mailbox: PortMailbox<Message>
  let source: DescriptorSource

  /// - Parameters:
  ///   - label: a name for traces and `debugDescription`.
  ///   - order: lower orders are handled first when several sources are ready.
  ///   - handler: called on the loop's thread with each message, in order; a `sending`
  ///     closure, so it may capture a non-Sendable value the caller hands over.
  public convenience init(
    label: String? = nil, order: Int = 0, handler: sending @escaping (Message) -> Void
  ) throws(LoopError) {
    try self.init(
      label: label, order: order, isolatedHandler: handler, releasesOnLoopThread: false)
  }

  /// The public initialiser with a plain handler: that one has the `sending` proof,
  /// `IsolatedLoop.addPort` the thread check.
  init(
    label: String?, order: Int, isolatedHandler handler: @escaping (Message) -> Void,
    releasesOnLoopThread: Bool
  ) throws(LoopError) {
    let mailbox = try PortMailbox<Message>()
    self.mailbox = mailbox
    self.source = DescriptorSource(
      fileDescriptor: mailbox.eventFD.fd, label: label, interest: .readable, order: order,
      onTeardown: { thread in mailbox.refuse(.loopTornDown(thread: thread)) },
      messages: mailbox,
      beforeNextWait: { mailbox.drainIfIdle() },
      releasesOnLoopThread: releasesOnLoopThread,
      handler: { _, _ in mailbox.deliver(to: handler) })
  }

  /// Queues a message and wakes the loop. Safe from any thread. Throws once the port was
  /// invalidated or its loop's thread began to exit (or its `ResidentThread`'s final drain
  /// began), so a message is never dropped without the sender knowing: every message
  /// accepted before that is delivered by the thread's final drain if the port is in a mode,
  /// and otherwise stays in the port for `invalidate()` to hand back.
  public func send(_ message: Message) throws(LoopError) {
    try mailbox.post(message)
  }

  /// False once the port was invalidated or its loop torn down. Mirrors `CFMachPortIsValid`.
  public var isValid: Bool { source.isValid }

  /// The name given at creation, for traces.
  public var label: String? { source.label }

  /// Removes the port from every mode and closes its eventfd. Returns the messages that were
  /// sent but not yet delivered, so the caller decides what happens to them.
  @discardableResult
  public func invalidate() -> [Message] {
    source.invalidate()
    return mailbox.close()
  }

  /// Messages sent and not yet handled.
  public var pendingCount: Int { mailbox.pendingCount }
}
