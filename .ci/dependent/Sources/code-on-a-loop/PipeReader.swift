import Glibc
import RunLoopKit

/// Reads a pipe into its own buffer from a descriptor source whose handler mutates it, and
/// says what it read once the writer hangs up.
final class PipeReader {
  private let fd: Int32
  private var received: [UInt8] = []
  private let finished: @Sendable (String) -> Void

  init(fd: Int32, finished: @escaping @Sendable (String) -> Void) {
    self.fd = fd
    self.finished = finished
  }

  func start() throws {
    try Loop.current.assumeIsolated().addSource(fileDescriptor: fd) { source, events in
      self.readAvailable()
      // A hang-up is told once: read to the end, then let the source go.
      guard events.contains(.hangUp) else { return }
      while self.readAvailable() > 0 {}
      source.invalidate()
      close(self.fd)
      self.finished(String(decoding: self.received, as: UTF8.self))
    }
  }

  @discardableResult
  private func readAvailable() -> Int {
    var buffer = [UInt8](repeating: 0, count: 256)
    let count = read(fd, &buffer, buffer.count)
    if count > 0 { received += buffer.prefix(count) }
    return count
  }
}
