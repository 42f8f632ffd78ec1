import Glibc
import RunLoopKit

/// `network`: a resident "network thread" serving a loopback TCP echo exchange through
/// descriptor sources — one thread for every socket callback, the way early networking
/// libraries (NSURLConnection's, CFNetwork's) kept one.
public enum NetworkDemo {
  public static let messages = ["hello", "run loop", "goodbye"]

  public struct Outcome: Sendable {
    public let report: DemoReport
    /// What the server read, and what came back to the client, message by message.
    public let serverReceived: [String]
    public let clientReceived: [String]
    public let callbacksOffThread: Int
    /// The sockets the demo opened (all closed by the time it returns).
    public let descriptors: [Int32]
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
    // session is made there and reached only through a LoopBound, so it needs no lock and no
    // Sendable conformance. This thread waits for a Sendable flag, then asks for a snapshot.
    let exchange = Result {
      let session = try thread.performAndWait { () throws -> LoopBound<EchoSession> in
        let session = LoopBound(
          EchoSession(tracer: tracer, loop: .current) { finished.value = true }, loop: .current)
        try session.value.start()
        return session
      }
      try waitFor("the echo exchange to finish") { finished.value }
      return session
    }
    // On the loop's own thread, after the last callout was recorded: stop tracing, close
    // whatever a failure left open, and copy out what the demo reports.
    let snapshot = try thread.performAndWait { () -> EchoSession.Snapshot? in
      tracer.detach()
      guard case .success(let session) = exchange else { return nil }
      session.value.closeAll()
      return session.value.snapshot
    }
    _ = try exchange.get()  // the first failure is the one worth reporting
    guard let state = snapshot else { throw DemoError("the echo session was never set up") }
    if let failure = state.failure { throw DemoError(failure) }

    var report = DemoReport(name: "network", title: "a network thread serving sockets")
    report.steps.append(
      DemoStep(
        caption: "A resident thread listens on 127.0.0.1, connects to itself, and echoes "
          + "\(messages.count) messages, all through descriptor sources",
        events: tracer.events, notes: state.notes))
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
      of any reactor: many connections, one thread, no blocking call anywhere. None of the \
      state is Sendable: each connection is a plain object handed to its source's handler \
      (a `sending` closure), and the session they share is a LoopBound that only the \
      network thread can open.
      """
    return Outcome(
      report: report, serverReceived: state.serverReceived, clientReceived: state.clientReceived,
      callbacksOffThread: state.offThread, descriptors: state.descriptors)
  }
}

/// The sockets and what passed through them. A plain class that lives on the network
/// thread: its callbacks reach it through a `LoopBound`, so it has no lock.
final class EchoSession {
  /// What the demo reports, copied out on the network thread.
  struct Snapshot: Sendable {
    var notes: [String] = []
    var serverReceived: [String] = []
    var clientReceived: [String] = []
    var failure: String?
    var offThread = 0
    /// Every socket opened.
    var descriptors: [Int32] = []
  }

  let tracer: LoopTracer
  let loop: Loop
  /// Called once, when the exchange is over (or failed).
  let onFinish: @Sendable () -> Void
  var snapshot = Snapshot()
  private var open: Set<Int32> = []
  private var sources: [DescriptorSource] = []
  private var finished = false

  init(tracer: LoopTracer, loop: Loop, onFinish: @escaping @Sendable () -> Void) {
    self.tracer = tracer
    self.loop = loop
    self.onFinish = onFinish
  }

  func note(_ text: String) { snapshot.notes.append("\(stamp(tracer)): \(text)") }

  /// Runs on the network thread: opens the listener and starts the client's connect.
  func start() throws {
    let session = LoopBound(self, loop: loop)  // what the callbacks share
    let (listener, port) = try TCPSocket.listen()
    opened(listener)
    let listenerSource = DescriptorSource(fileDescriptor: listener, label: "listener") {
      source, _ in session.value.accept(source, listener, session)
    }
    track(listenerSource)
    try loop.add(listenerSource, to: .default)
    let fd = try TCPSocket.connect(port: port)
    opened(fd)
    note("listening on 127.0.0.1:\(port) (fd \(listener)); client fd \(fd) connecting")
    // The client's own state is a fresh object that only its handler holds: handed over
    // with the handler (`sending`), no LoopBound needed.
    let client = EchoClient(fd: fd, session: session)
    let clientSource = DescriptorSource(
      fileDescriptor: fd, label: "client", interest: .writable
    ) { source, events in
      client.talk(source, events)
    }
    track(clientSource)
    try loop.add(clientSource, to: .default)
  }

  /// The listener: accept one connection, stop listening, serve the connection.
  private func accept(
    _ source: DescriptorSource, _ listener: Int32, _ session: LoopBound<EchoSession>
  ) {
    checkThread()
    guard let fd = attempt({ try TCPSocket.accept(listener) }) else { return }
    opened(fd)
    note("listener: accepted a connection (fd \(fd)); listener closed")
    source.invalidate()
    closeSocket(listener)
    let connection = EchoServerConnection(fd: fd, session: session)
    let server = DescriptorSource(fileDescriptor: fd, label: "server") { source, _ in
      connection.serve(source)
    }
    track(server)
    attempt { try loop.add(server, to: .default) }
  }

  private func opened(_ fd: Int32) {
    snapshot.descriptors.append(fd)
    open.insert(fd)
  }

  private func track(_ source: DescriptorSource) { sources.append(source) }

  func closeSocket(_ fd: Int32) {
    if open.remove(fd) != nil { close(fd) }
  }

  /// At the end: removes every source and closes every socket that a failure left behind
  /// (after a clean exchange there are none).
  func closeAll() {
    for source in sources { source.invalidate() }
    for fd in open { close(fd) }
    sources = []
    open = []
  }

  func finish() {
    guard !finished else { return }
    finished = true
    onFinish()
  }

  func checkThread() {
    if !loop.isCurrent { snapshot.offThread += 1 }
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

/// The server's side of the connection: echo what comes, close at end of stream. Plain
/// state, owned by the server source's handler.
final class EchoServerConnection {
  let fd: Int32
  let session: LoopBound<EchoSession>

  init(fd: Int32, session: LoopBound<EchoSession>) {
    self.fd = fd
    self.session = session
  }

  func serve(_ source: DescriptorSource) {
    let session = session.value
    session.checkThread()
    guard let bytes = session.attempt({ try TCPSocket.read(fd) }) else { return }
    if bytes.isEmpty {
      session.note("server: end of stream; closes its side")
      source.invalidate()
      session.closeSocket(fd)
      return
    }
    let text = String(decoding: bytes, as: UTF8.self)
    session.snapshot.serverReceived.append(text)
    session.note("server: read \"\(text)\", echoes it")
    session.attempt { try TCPSocket.write(fd, bytes) }
  }
}

/// The client: send once connected, then one message per echo, then shut down. Plain state
/// (a receive buffer, whether it is still connecting), owned by the client source's handler.
final class EchoClient {
  let fd: Int32
  let session: LoopBound<EchoSession>
  private var connecting = true
  private var buffer: [UInt8] = []

  init(fd: Int32, session: LoopBound<EchoSession>) {
    self.fd = fd
    self.session = session
  }

  func talk(_ source: DescriptorSource, _ events: DescriptorSource.Events) {
    let session = session.value
    session.checkThread()
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
    guard let bytes = session.attempt({ try TCPSocket.read(fd) }) else { return }
    if bytes.isEmpty {
      session.note("client: end of stream; closes, exchange over")
      source.invalidate()
      session.closeSocket(fd)
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
