import Glibc

/// The few socket calls the network demo needs, each turning -1 into a `DemoError` that
/// names the call and the errno. Every socket is non-blocking and close-on-exec.
enum TCPSocket {
  static func check(_ result: Int32, _ call: String) throws -> Int32 {
    guard result == -1 else { return result }
    let code = errno
    throw DemoError("\(call) failed: errno \(code) (\(String(cString: strerror(code))))")
  }

  static func make() throws -> Int32 {
    let kind =
      Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue)
      | Int32(SOCK_CLOEXEC.rawValue)
    return try check(socket(AF_INET, kind, 0), "socket(AF_INET, SOCK_STREAM)")
  }

  static func loopback(port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    return address
  }

  /// A listening socket on 127.0.0.1 at a port the kernel picks; returns it and the port.
  static func listen() throws -> (fd: Int32, port: UInt16) {
    let fd = try make()
    do {
      var address = loopback(port: 0)
      let size = socklen_t(MemoryLayout<sockaddr_in>.size)
      _ = try withUnsafePointer(to: &address) { pointer in
        try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          try check(bind(fd, $0, size), "bind(127.0.0.1:0)")
        }
      }
      _ = try check(Glibc.listen(fd, 8), "listen")
      var bound = sockaddr_in()
      var length = size
      _ = try withUnsafeMutablePointer(to: &bound) { pointer in
        try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          try check(getsockname(fd, $0, &length), "getsockname")
        }
      }
      return (fd, UInt16(bigEndian: bound.sin_port))
    } catch {
      close(fd)
      throw error
    }
  }

  /// Starts connecting to 127.0.0.1:`port`; the socket turns writable when it is done.
  static func connect(port: UInt16) throws -> Int32 {
    let fd = try make()
    var address = loopback(port: port)
    let result = withUnsafePointer(to: &address) { pointer in
      pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    if result == -1 && errno != EINPROGRESS {
      let code = errno
      close(fd)
      throw DemoError("connect(127.0.0.1:\(port)) failed: errno \(code)")
    }
    return fd
  }

  /// The error a non-blocking connect finished with (0: connected).
  static func connectResult(_ fd: Int32) throws -> Int32 {
    var value: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    _ = try check(getsockopt(fd, SOL_SOCKET, SO_ERROR, &value, &length), "getsockopt(SO_ERROR)")
    return value
  }

  /// Accepts a connection and makes it non-blocking and close-on-exec (Glibc's module does
  /// not export accept4).
  static func accept(_ listener: Int32) throws -> Int32 {
    let fd = try check(Glibc.accept(listener, nil, nil), "accept")
    do {
      _ = try check(fcntl(fd, F_SETFD, FD_CLOEXEC), "fcntl(F_SETFD)")
      let flags = try check(fcntl(fd, F_GETFL), "fcntl(F_GETFL)")
      _ = try check(fcntl(fd, F_SETFL, flags | O_NONBLOCK), "fcntl(F_SETFL)")
    } catch {
      close(fd)
      throw error
    }
    return fd
  }

  /// Reads what is there: the bytes, or an empty array at end of stream.
  static func read(_ fd: Int32) throws -> [UInt8] {
    var buffer = [UInt8](repeating: 0, count: 4096)
    while true {
      let count = Glibc.read(fd, &buffer, buffer.count)
      if count >= 0 { return Array(buffer.prefix(count)) }
      if errno != EINTR { _ = try check(-1, "read(fd \(fd))") }
    }
  }

  /// Writes all of `bytes`; the demo's messages are far smaller than a socket buffer.
  static func write(_ fd: Int32, _ bytes: [UInt8]) throws {
    var written = 0
    while written < bytes.count {
      let count = bytes[written...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
      if count < 0 && errno == EINTR { continue }
      if count < 0 { _ = try check(-1, "write(fd \(fd))") }
      written += count
    }
  }
}
