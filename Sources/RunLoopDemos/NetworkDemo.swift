import Glibc
import RunLoopKit

/// `network`: a resident "network thread" serving a loopback TCP echo exchange through
/// descriptor sources — one thread for every socket callback, the way early networking
/// libraries (NSURLConnection's, CFNetwork's) kept one.
public enum NetworkDemo {
  public static let messages = ["hello", "run loop", "goodbye"]
  /// How long a connection may go without reading anything before it gives up. Generous: a
  /// healthy exchange takes a few milliseconds, so an idle timer that fires is a failure.
  public static let idleTimeout: Duration = .seconds(5)
  /// The timeout for notes, in whole seconds.
  static let idleText = "\(idleTimeout.components.seconds) s"

  /// What became of the connections' idle timers.
  public struct IdleTimers: Sendable, Equatable {
    /// Timers armed: one per connection, server and client.
    public var armed = 0
    /// Times a read pushed a timer's fire date back.
    public var moved = 0
    /// Times one fired (none, in a healthy exchange).
    public var fired = 0
    /// Timers still valid when the exchange was over, before the demo cleaned up: none, since
    /// a connection invalidates its own timer when it closes.
    public var stillValid = 0
  }

  public struct Outcome: Sendable {
    public let report: DemoReport
    /// What the server read, and what came back to the client, message by message.
    public let serverReceived: [String]
    public let clientReceived: [String]
    public let callbacksOffThread: Int
    /// The sockets the demo opened (all closed by the time it returns).
    public let descriptors: [Int32]
    public let idleTimers: IdleTimers
  }

  public static func run() throws -> Outcome {
    let thread = try ResidentThread(name: "network")
    defer {
      thread.stop()
      try? thread.join()
    }
    // Traced from its first sleep: the block that sets the sockets up is what wakes it.
    try waitFor("the network thread to sleep") { thread.loop.isWaiting }
    let tracer = LoopTracer()
    try tracer.attach(to: thread.loop)
    let finished = Locked(false)
    // The sockets and everything that passed through them live on the network thread: the
    // session is made there and kept in the thread's own storage, like an object in
    // NSThread's threadDictionary, which the network thread's blocks reach and nothing here
    // does. It never leaves, not even as a handle (a LoopBoundBox would be one), so it needs
    // no lock and no Sendable conformance. All that comes back here is Sendable: a flag, then
    // a snapshot.
    let exchange = Result {
      try thread.performAndWait {
        let session = EchoSession(view: thread.assumeIsolated(), tracer: tracer) {
          finished.value = true
        }
        // Stored first, so that the last block finds whatever a failed start opened.
        thread.storage[EchoSession.key] = session
        try session.start()
      }
      try waitFor("the echo exchange to finish") { finished.value }
    }
    // On the loop's own thread, after the last callout was recorded: stop tracing, take the
    // session out of the thread's storage, close whatever a failure left open, and copy out
    // what the demo reports.
    let snapshot = try thread.performAndWait { () -> EchoSession.Snapshot? in
      tracer.detach()
      guard let session = thread.storage[EchoSession.key] else { return nil }
      thread.storage[EchoSession.key] = nil
      return session.end()
    }
    try exchange.get()  // the first failure is the one worth reporting
    guard let state = snapshot else { throw DemoError("the echo session was never set up") }
    if let failure = state.failure { throw DemoError(failure) }

    let idle = state.idle
    var report = DemoReport(name: "network", title: "a network thread serving sockets")
    report.steps.append(
      DemoStep(
        caption: "A resident thread listens on 127.0.0.1, connects to itself, and echoes "
          + "\(messages.count) messages, all through descriptor sources",
        trace: tracer.snapshot(),
        notes: state.notes + [
          "idle timers: \(idle.armed) armed, pushed back \(idle.moved) times by reads, "
            + "\(idle.fired) fired, \(idle.stillValid) left valid"
        ]))
    report.explanation = """
      One thread served the listening socket, the client and the server side of the \
      connection, and it was asleep in epoll_wait whenever none of them had anything to say. \
      Each socket is a descriptor source (CF's version-1 source; a CFSocket there): the \
      kernel reported it readable or writable, the loop woke, and the source's handler did \
      one small non-blocking read or write and returned. A non-blocking connect reports \
      completion by turning writable, so the client first waits for writable and then \
      switches its interest to readable. Closing is a message too: after the client shut \
      down its sending side the server read end-of-stream, closed, and the client read its \
      own end-of-stream. That is the shape of the networking threads of old Cocoa code, and \
      of any reactor: many connections, one thread, no blocking call anywhere. This code \
      lives on the loop, so it arms its own sources and timers: the session and each \
      connection are plain classes, with no lock and nothing Sendable, that add them through \
      the view assumeIsolated() returns on the loop's thread, with closures that capture the \
      connection itself. Each connection's idle timer follows CF's idiom: one timer for the \
      connection's whole life, whose fire date every read moves \(idleText) on (never a new \
      timer per read), invalidated when the connection closes. Invalidating a source or a \
      timer releases its closure, which breaks the cycle between a connection and its items. \
      The session stays in the network thread's storage, where the demo's last block finds it \
      and copies out a snapshot: only Sendable values leave the thread.
      """
    return Outcome(
      report: report, serverReceived: state.serverReceived, clientReceived: state.clientReceived,
      callbacksOffThread: state.offThread, descriptors: state.descriptors, idleTimers: state.idle)
  }
}

/// The exchange as the network thread sees it: the listener, both ends of the connection and
/// what passed through them. A plain class that lives on the network thread — made there,
/// kept in its `ThreadStorage`, called only by that loop's callbacks — so it has no lock.
final class EchoSession {
  /// Where the network thread keeps the session between the demo's blocks.
  static let key = ThreadStorageKey<EchoSession>("echo session")

  /// What the demo reports, copied out on the network thread.
  struct Snapshot: Sendable {
    var notes: [String] = []
    var serverReceived: [String] = []
    var clientReceived: [String] = []
    var failure: String?
    var offThread = 0
    /// Every socket opened.
    var descriptors: [Int32] = []
    var idle = NetworkDemo.IdleTimers()
  }

  /// The loop as its own callbacks see it: every source and timer of the exchange is armed
  /// through it, with a closure that captures the object it serves.
  let view: IsolatedLoop
  let tracer: LoopTracer
  /// Called once, when the exchange is over (or failed).
  let onFinish: @Sendable () -> Void
  var snapshot = Snapshot()
  private var open: Set<Int32> = []
  private var listener: DescriptorSource?
  private var connections: [EchoConnection] = []
  /// Every idle timer armed, kept to check at the end that each connection invalidated its own.
  private var idleTimers: [LoopTimer] = []
  private var finished = false

  init(view: IsolatedLoop, tracer: LoopTracer, onFinish: @escaping @Sendable () -> Void) {
    self.view = view
    self.tracer = tracer
    self.onFinish = onFinish
  }

  func note(_ text: String) { snapshot.notes.append("\(stamp(tracer)): \(text)") }

  /// Runs on the network thread: opens the listener and starts the client's connect.
  func start() throws {
    let (listenerFD, port) = try TCPSocket.listen()
    opened(listenerFD)
    // The listener's handler captures the session: a cycle (session → source → handler →
    // session) until accept or the end invalidates the source, which releases the handler.
    listener = try view.addSource(fileDescriptor: listenerFD, label: "listener") {
      [self] _, _ in accept(from: listenerFD)
    }
    let fd = try TCPSocket.connect(port: port)
    opened(fd)
    note(
      "listening on 127.0.0.1:\(port) (fd \(listenerFD)); client fd \(fd) connecting; "
        + "each end arms a \(NetworkDemo.idleText) idle timer that its reads push back")
    let client = EchoClient(name: "client", fd: fd, session: self)
    connections.append(client)
    try client.open(interest: .writable)
  }

  /// The listener: accept one connection, stop listening, serve the connection.
  private func accept(from listenerFD: Int32) {
    checkThread()
    guard let fd = attempt({ try TCPSocket.accept(listenerFD) }) else { return }
    opened(fd)
    note("listener: accepted a connection (fd \(fd)); listener closed")
    listener?.invalidate()
    listener = nil
    closeSocket(listenerFD)
    let server = EchoServer(name: "server", fd: fd, session: self)
    connections.append(server)
    attempt { try server.open(interest: .readable) }
  }

  private func opened(_ fd: Int32) {
    snapshot.descriptors.append(fd)
    open.insert(fd)
  }

  func closeSocket(_ fd: Int32) {
    if open.remove(fd) != nil { close(fd) }
  }

  func armed(_ timer: LoopTimer) {
    idleTimers.append(timer)
    snapshot.idle.armed += 1
  }

  /// The demo's last block: counts the idle timers still valid (none, once both connections
  /// closed), then invalidates every source and timer and closes every socket that a failure
  /// left behind (after a clean exchange there are none), and returns the snapshot.
  func end() -> Snapshot {
    snapshot.idle.stillValid = idleTimers.filter(\.isValid).count
    for connection in connections { connection.close() }
    listener?.invalidate()
    for fd in open { close(fd) }
    connections = []
    listener = nil
    open = []
    return snapshot
  }

  func finish() {
    guard !finished else { return }
    finished = true
    onFinish()
  }

  func checkThread() {
    if !view.loop.isCurrent { snapshot.offThread += 1 }
  }

  /// Runs a socket call; a failure ends the demo with its message.
  @discardableResult
  func attempt<T>(_ call: () throws -> T) -> T? {
    do {
      return try call()
    } catch {
      fail("\(error)")
      return nil
    }
  }

  func fail(_ message: String) {
    if snapshot.failure == nil { snapshot.failure = message }
    finish()
  }
}

/// One end of the connection: a socket, the descriptor source that watches it, and an idle
/// timer. It lives on the network thread, so it arms both through the session's view with
/// closures that capture the connection itself; `close()` invalidates both, which releases
/// those closures and breaks the cycles (connection → source → handler → connection).
class EchoConnection {
  /// The source's label, and the name in notes.
  let name: String
  let fd: Int32
  let session: EchoSession
  private var source: DescriptorSource?
  private var idleTimer: LoopTimer?

  init(name: String, fd: Int32, session: EchoSession) {
    self.name = name
    self.fd = fd
    self.session = session
  }

  /// Starts watching the socket for `interest` and arms the idle timer.
  func open(interest: DescriptorSource.Events) throws(LoopError) {
    source = try session.view.addSource(fileDescriptor: fd, label: name, interest: interest) {
      [self] source, events in
      session.checkThread()
      handle(source, events)
    }
    // One timer for the connection's whole life: a read moves its fire date (CF's
    // CFRunLoopTimerSetNextFireDate idiom) rather than replacing it with a new timer.
    let timer = try session.view.addTimer(label: "\(name) idle", after: NetworkDemo.idleTimeout) {
      [self] _ in idledOut()
    }
    idleTimer = timer
    session.armed(timer)
  }

  /// What to do when the socket is ready; each end overrides it.
  func handle(_ source: DescriptorSource, _ events: DescriptorSource.Events) {}

  /// Reads what is there (empty at end of stream), pushing the idle deadline back when
  /// anything arrived; nil after a failure.
  func read() -> [UInt8]? {
    guard let bytes = session.attempt({ try TCPSocket.read(fd) }) else { return nil }
    if !bytes.isEmpty, let idleTimer {
      idleTimer.fireDate = LoopClock.Instant.now.advanced(by: NetworkDemo.idleTimeout)
      session.snapshot.idle.moved += 1
    }
    return bytes
  }

  /// Stops watching the socket, invalidates the idle timer and closes the socket. Idempotent.
  func close() {
    source?.invalidate()
    idleTimer?.invalidate()
    source = nil
    idleTimer = nil
    session.closeSocket(fd)
  }

  /// The idle timer fired: nothing was read for the whole timeout. Never in a healthy
  /// exchange, so the demo fails.
  private func idledOut() {
    session.checkThread()
    session.snapshot.idle.fired += 1
    session.note("\(name): nothing read for \(NetworkDemo.idleText); closes")
    close()
    session.fail("the \(name) side idled out: nothing read for \(NetworkDemo.idleText)")
  }
}

/// The server's side of the connection: echo what comes, close at end of stream.
final class EchoServer: EchoConnection {
  override func handle(_ source: DescriptorSource, _ events: DescriptorSource.Events) {
    guard let bytes = read() else { return }
    if bytes.isEmpty {
      session.note("server: end of stream; closes its side, invalidates its idle timer")
      close()
      return
    }
    let text = String(decoding: bytes, as: UTF8.self)
    session.snapshot.serverReceived.append(text)
    session.note("server: read \"\(text)\", echoes it")
    session.attempt { try TCPSocket.write(fd, bytes) }
  }
}

/// The client: send once connected, then one message per echo, then shut down. Its own
/// state is a receive buffer and whether it is still connecting.
final class EchoClient: EchoConnection {
  private var connecting = true
  private var buffer: [UInt8] = []

  override func handle(_ source: DescriptorSource, _ events: DescriptorSource.Events) {
    if connecting {
      guard let code = session.attempt({ try TCPSocket.connectResult(fd) }) else { return }
      guard code == 0 else { return session.fail("connect finished with errno \(code)") }
      connecting = false
      session.note(
        "client: connected (fd turned \(events)); sends \"\(NetworkDemo.messages[0])\"")
      session.attempt { try TCPSocket.write(fd, Array(NetworkDemo.messages[0].utf8)) }
      session.attempt { try source.setInterest(.readable) }
      return
    }
    guard let bytes = read() else { return }
    if bytes.isEmpty {
      session.note("client: end of stream; closes, invalidates its idle timer; exchange over")
      close()
      session.finish()
      return
    }
    // TCP is a stream: collect bytes until the whole echo of the last message is in.
    buffer += bytes
    let received = session.snapshot.clientReceived.count
    guard buffer.count >= NetworkDemo.messages[received].utf8.count else { return }
    let echoed = String(decoding: buffer, as: UTF8.self)
    buffer = []
    session.snapshot.clientReceived.append(echoed)
    let sent = received + 1
    if sent < NetworkDemo.messages.count {
      let next = NetworkDemo.messages[sent]
      session.note("client: got the echo \"\(echoed)\"; sends \"\(next)\"")
      session.attempt { try TCPSocket.write(fd, Array(next.utf8)) }
    } else {
      session.note("client: got the echo \"\(echoed)\"; shuts down its sending side")
      shutdown(fd, Int32(SHUT_WR))
    }
  }
}
