import RunLoopKit

/// Rows that may only be touched on the thread that produced them: a plain class, as a
/// database binding's result set would be. No Sendable conformance, no lock.
final class ResultSet {
  private(set) var rows: [String] = []
  var queriesServed = 0

  func load(_ names: [String]) { rows = names }

  func matching(_ prefix: String) -> [String] {
    queriesServed += 1
    return rows.filter { $0.hasPrefix(prefix) }
  }
}

/// Search-as-you-type over thread-bound results: the result set lives on one resident thread,
/// every query runs there, and only Sendable values (strings, counts) come back.
struct SearchOverResults {
  static func run() async throws -> String {
    let database = try ResidentThread(name: "database")
    defer {
      database.stop()
      try? database.join()
    }
    // Created on the database thread, bound to it, shared by the callbacks below.
    let results = try database.performAndWait { LoopBoundBox(ResultSet(), loop: .current) }
    try database.perform {
      results.value.load(["apple", "apricot", "avocado", "banana", "blueberry", "cherry"])
    }
    // A keystroke arrives every few ms; each query runs on the database thread.
    var answers: [String: [String]] = [:]
    for query in ["a", "ap", "apr"] {
      answers[query] = try await database.run { results.value.matching(query) }
    }
    // A refresh later on, cancelled before it runs: it must not run.
    let refresh = try database.perform(after: .seconds(30)) {
      results.value.load([])
    }
    let prevented = refresh.cancel()
    let served = try database.performAndWait { results.value.queriesServed }
    guard answers["ap"] == ["apple", "apricot"], answers["apr"] == ["apricot"], served == 3,
      prevented
    else {
      throw Failure("search over thread-bound results: \(answers), served \(served)")
    }
    return "search: \(served) queries answered on \(database.name)"
  }
}

struct Failure: Error, CustomStringConvertible {
  let description: String
  init(_ description: String) { self.description = description }
}
