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
    let session = EchoSession(tracer: tracer) { [weak thread] in thread?.isCurrent == true }
    let exchange = Result {
      try thread.performAndWait { try session.start(on: Loop.current) }
      try waitFor("the echo exchange to finish") { session.isFinished }
    }
    // On the loop's own thread, after the last callout was recorded: stop tracing, and close
    // whatever a failure left open.
    let cleanup = Result {
      try thread.performAndWait {
        tracer.detach()
        session.closeAll()
      }
    }
    try exchange.get()  // the first failure is the one worth reporting
    try cleanup.get()
    let state = session.snapshot
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
      of any reactor: many connections, one thread, no blocking call anywhere.
      """
    return Outcome(
      report: report, serverReceived: state.serverReceived, clientReceived: state.clientReceived,
      callbacksOffThread: state.offThread, descriptors: state.descriptors)
  }
}

/// The sockets and what passed through them. Only callbacks on the network thread change it;
/// the mutex lets the demo's thread read it.
final class EchoSession: Sendable {
  struct State: Sendable {
    var notes: [String] = []
    var serverReceived: [String] = []
    var clientReceived: [String] = []
    var clientBuffer: [UInt8] = []
    var connecting = true
    var finished = false
    var failure: String?
    var offThread = 0
    /// Every socket opened, and the ones not closed yet.
    var descriptors: [Int32] = []
    var open: Set<Int32> = []
    var sources: [DescriptorSource] = []
  }

  let tracer: LoopTracer
  let isOnThread: @Sendable () -> Bool
  let state = Locked(State())

  init(tracer: LoopTracer, isOnThread: @escaping @Sendable () -> Bool) {
    self.tracer = tracer
    self.isOnThread = isOnThread
  }

  var isFinished: Bool { state.withLock { $0.finished } }
  var snapshot: State { state.withLock { $0 } }

  func note(_ text: String) {
    state.withLock { $0.notes.append("\(stamp(tracer)): \(text)") }
  }

  /// Runs on the network thread: opens the listener and starts the client's connect.
  func start(on loop: Loop) throws {
    let (listener, port) = try TCPSocket.listen()
    opened(listener)
    let listenerSource = DescriptorSource(fileDescriptor: listener, label: "listener") {
      [self] source, _ in
      guard let connection = attempt({ try TCPSocket.accept(listener) }) else { return }
      opened(connection)
      note("listener: accepted a connection (fd \(connection)); listener closed")
      source.invalidate()
      closeSocket(listener)
      let server = DescriptorSource(fileDescriptor: connection, label: "server") {
        [self] source, _ in serve(source, connection)
      }
      track(server)
      attempt { try loop.add(server, to: .default) }
    }
    track(listenerSource)
    try loop.add(listenerSource, to: .default)
    let client = try TCPSocket.connect(port: port)
    opened(client)
    note("listening on 127.0.0.1:\(port) (fd \(listener)); client fd \(client) connecting")
    let clientSource = DescriptorSource(
      fileDescriptor: client, label: "client", interest: .writable
    ) { [self] source, events in
      talk(source, client, events)
    }
    track(clientSource)
    try loop.add(clientSource, to: .default)
  }

  private func opened(_ fd: Int32) {
    state.withLock {
      $0.descriptors.append(fd)
      $0.open.insert(fd)
    }
  }

  private func track(_ source: DescriptorSource) { state.withLock { $0.sources.append(source) } }

  private func closeSocket(_ fd: Int32) {
    if state.withLock({ $0.open.remove(fd) }) != nil { close(fd) }
  }

  /// On the network thread, at the end: removes every source and closes every socket that a
  /// failure left behind (after a clean exchange there are none).
  func closeAll() {
    let (sources, fds) = state.withLock { state in
      defer {
        state.sources = []
        state.open = []
      }
      return (state.sources, state.open)
    }
    for source in sources { source.invalidate() }
    for fd in fds { close(fd) }
  }

  /// The server's side of the connection: echo what comes, close at end of stream.
  func serve(_ source: DescriptorSource, _ fd: Int32) {
    checkThread()
    guard let bytes = attempt({ try TCPSocket.read(fd) }) else { return }
    if bytes.isEmpty {
      note("server: end of stream; closes its side")
      source.invalidate()
      closeSocket(fd)
      return
    }
    let text = String(decoding: bytes, as: UTF8.self)
    state.withLock { $0.serverReceived.append(text) }
    note("server: read \"\(text)\", echoes it")
    attempt { try TCPSocket.write(fd, bytes) }
  }

  /// The client: send once connected, then one message per echo, then shut down.
  func talk(_ source: DescriptorSource, _ fd: Int32, _ events: DescriptorSource.Events) {
    checkThread()
    if state.withLock({ $0.connecting }) {
      guard let code = attempt({ try TCPSocket.connectResult(fd) }) else { return }
      guard code == 0 else { return fail("connect finished with errno \(code)") }
      state.withLock { $0.connecting = false }
      note("client: connected (fd turned \(events)); sends \"\(NetworkDemo.messages[0])\"")
      attempt { try TCPSocket.write(fd, Array(NetworkDemo.messages[0].utf8)) }
      attempt { try source.setInterest(.readable) }
      return
    }
    guard let bytes = attempt({ try TCPSocket.read(fd) }) else { return }
    if bytes.isEmpty {
      note("client: end of stream; closes, exchange over")
      source.invalidate()
      closeSocket(fd)
      state.withLock { $0.finished = true }
      return
    }
    // TCP is a stream: collect bytes until the whole echo of the last message is in.
    let echoed = state.withLock { state -> String? in
      state.clientBuffer += bytes
      let expected = NetworkDemo.messages[state.clientReceived.count].utf8.count
      guard state.clientBuffer.count >= expected else { return nil }
      let text = String(decoding: state.clientBuffer, as: UTF8.self)
      state.clientBuffer = []
      state.clientReceived.append(text)
      return text
    }
    guard let echoed else { return }
    let sent = state.withLock { $0.clientReceived.count }
    if sent < NetworkDemo.messages.count {
      let next = NetworkDemo.messages[sent]
      note("client: got the echo \"\(echoed)\"; sends \"\(next)\"")
      attempt { try TCPSocket.write(fd, Array(next.utf8)) }
    } else {
      note("client: got the echo \"\(echoed)\"; shuts down its sending side")
      shutdown(fd, Int32(SHUT_WR))
    }
  }

  private func checkThread() {
    if !isOnThread() { state.withLock { $0.offThread += 1 } }
  }

  /// Runs a socket call; a failure ends the demo with its message.
  @discardableResult
  private func attempt<T>(_ call: () throws -> T) -> T? {
    do {
      return try call()
    } catch {
      fail("\(error)")
      return nil
    }
  }

  private func fail(_ message: String) {
    state.withLock {
      if $0.failure == nil { $0.failure = message }
      $0.finished = true
    }
  }
}
