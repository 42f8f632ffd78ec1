import Glibc
import RunLoopKit

/// A connection's state: a plain class, handed to its descriptor source's handler.
final class PipeConnection {
  let fd: Int32
  var received: [UInt8] = []

  init(fd: Int32) { self.fd = fd }

  /// Reads what is there; true at end of stream.
  func readAvailable() -> Bool {
    var buffer = [UInt8](repeating: 0, count: 256)
    let count = read(fd, &buffer, buffer.count)
    if count > 0 { received += buffer.prefix(count) }
    return count <= 0
  }
}

/// What every connection reports to: shared by several callbacks, so bound to the loop.
final class ConnectionLog {
  var lines: [String] = []
}

/// A network thread with non-Sendable state: a connection captured by its handler (a
/// `sending` closure) and a log shared through a `LoopBound`.
struct NetworkThread {
  static func run() throws -> String {
    let network = try ResidentThread(name: "network")
    defer {
      network.stop()
      try? network.join()
    }
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else { throw Failure("pipe failed") }
    let log = try network.performAndWait { LoopBound(ConnectionLog(), loop: .current) }
    let connection = PipeConnection(fd: fds[0])
    let source = DescriptorSource(fileDescriptor: fds[0]) { source, _ in
      let ended = connection.readAvailable()
      log.value.lines.append("read, \(connection.received.count) bytes so far")
      if ended {
        log.value.lines.append("closed: \(String(decoding: connection.received, as: UTF8.self))")
        source.invalidate()
        close(connection.fd)
      }
    }
    try network.loop.add(source, to: .default)
    for word in ["hello ", "run ", "loop"] {
      _ = word.withCString { write(fds[1], $0, strlen($0)) }
      usleep(2_000)
    }
    close(fds[1])
    var last = ""
    for _ in 0..<500 {
      last = try network.performAndWait { log.value.lines.last ?? "" }
      if last.hasPrefix("closed") { break }
      usleep(2_000)
    }
    guard last == "closed: hello run loop" else { throw Failure("network thread: \(last)") }
    return "network: \(last)"
  }
}
