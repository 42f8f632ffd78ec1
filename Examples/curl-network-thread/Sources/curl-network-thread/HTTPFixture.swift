import Foundation
import Glibc

/// The local HTTP server (the `http-fixture` program built beside this one), started for the
/// run and stopped after it, and a port where connections are refused.
final class HTTPFixture {
  let port: Int
  /// A port bound to a socket that never listens: connecting is refused, and nothing else
  /// can take the port while the fixture holds it.
  let refusedPort: Int
  private let process: Process
  private let refusingSocket: Int32

  init() throws {
    let executable = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
      .deletingLastPathComponent().appendingPathComponent("http-fixture")
    process = Process()
    process.executableURL = executable
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    // The fixture prints its port once it listens.
    var line = Data()
    while !line.contains(UInt8(ascii: "\n")) {
      let chunk = output.fileHandleForReading.availableData
      if chunk.isEmpty { throw FixtureError("http-fixture exited before it printed its port") }
      line += chunk
    }
    guard
      let port = Int(
        String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines))
    else { throw FixtureError("http-fixture printed no port") }
    self.port = port

    let refusing = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    refusingSocket = refusing
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        bind(refusing, $0, length) == 0 && getsockname(refusing, $0, &length) == 0
      }
    }
    guard bound else { throw FixtureError("could not bind a refusing port: errno \(errno)") }
    refusedPort = Int(UInt16(bigEndian: address.sin_port))
  }

  func stop() {
    process.terminate()
    process.waitUntilExit()
    close(refusingSocket)
  }
}

struct FixtureError: Error, CustomStringConvertible {
  var description: String
  init(_ description: String) { self.description = description }
}
