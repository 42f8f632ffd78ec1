import CCurl

/// One GET and what became of it. Lives on the network thread; `outcome` is its Sendable copy.
final class Transfer {
  let url: String
  let timeoutMilliseconds: Int
  var bytes = 0
  var result = CURLE_OK
  var status = 0

  init(url: String, timeoutMilliseconds: Int) {
    self.url = url
    self.timeoutMilliseconds = timeoutMilliseconds
  }

  var outcome: Outcome {
    Outcome(url: url, bytes: bytes, result: Int(result.rawValue), status: status)
  }

  static func from(_ user: UnsafeMutableRawPointer?) -> Transfer {
    Unmanaged<Transfer>.fromOpaque(user!).takeUnretainedValue()
  }
}

/// What a transfer ended with: bytes of body received, curl's result code, the HTTP status.
struct Outcome: Sendable {
  var url: String
  var bytes: Int
  var result: Int
  var status: Int
}

/// A planned request and what it must end with.
struct Request: Sendable {
  enum Expectation: Sendable, Equatable {
    case body(bytes: Int)
    case refused
    case timedOut
  }
  var url: String
  var timeoutMilliseconds: Int
  var expectation: Expectation

  /// `count` requests: mostly bodies of 1 KB to 4 MB, with a refused connection and a server
  /// that never answers every 40.
  static func plan(count: Int, serverPort: Int, refusedPort: Int) -> [Request] {
    (0..<count).map { index in
      switch index % 40 {
      case 7:
        return Request(
          url: "http://127.0.0.1:\(refusedPort)/bytes/1", timeoutMilliseconds: 10_000,
          expectation: .refused)
      case 23:
        return Request(
          url: "http://127.0.0.1:\(serverPort)/stall", timeoutMilliseconds: 300,
          expectation: .timedOut)
      default:
        let size = 1024 << (index % 13)  // 1 KB … 4 MB
        return Request(
          url: "http://127.0.0.1:\(serverPort)/bytes/\(size)", timeoutMilliseconds: 30_000,
          expectation: .body(bytes: size))
      }
    }
  }

  /// Why `outcome` is not what this request must end with, or nil.
  func mismatch(_ outcome: Outcome) -> String? {
    let ok = Int(CURLE_OK.rawValue)
    switch expectation {
    case .body(let bytes):
      if outcome.result == ok && outcome.status == 200 && outcome.bytes == bytes { return nil }
      return
        "\(url): expected \(bytes) bytes with 200, got \(outcome.bytes) bytes, status \(outcome.status), curl \(outcome.result)"
    case .refused:
      if outcome.result == Int(CURLE_COULDNT_CONNECT.rawValue) { return nil }
      return "\(url): expected a refused connection, got curl \(outcome.result)"
    case .timedOut:
      if outcome.result == Int(CURLE_OPERATION_TIMEDOUT.rawValue) && outcome.bytes == 0 {
        return nil
      }
      return "\(url): expected a timeout, got curl \(outcome.result) after \(outcome.bytes) bytes"
    }
  }
}
