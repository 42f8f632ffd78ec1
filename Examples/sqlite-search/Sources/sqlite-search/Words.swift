/// The catalogue both sides know: 100 000 made-up product names, the same every run. The
/// database is filled from it, and the check scans it without SQLite.
enum Words {
  static let syllables = [
    "qu", "ick", "br", "own", "fo", "x", "ju", "mp", "la", "zy", "do", "g", "ka", "ri", "mo", "te",
  ]

  static func make(count: Int) -> [String] {
    var state: UInt64 = 0x2545_F491_4F6C_DD1D
    var words: [String] = []
    words.reserveCapacity(count)
    for index in 0..<count {
      var word = ""
      // xorshift: a fixed sequence, so every run searches the same catalogue.
      state ^= state << 13
      state ^= state >> 7
      state ^= state << 17
      var bits = state
      for _ in 0..<(2 + Int(bits % 3)) {
        bits /= 3
        word += syllables[Int(bits % UInt64(syllables.count))]
        bits /= UInt64(syllables.count)
      }
      words.append("\(word)-\(index)")
    }
    return words
  }

  /// What a search must return, found by a plain scan: how many names start with `prefix`,
  /// and the first `limit` of them in byte order.
  static func scan(_ words: [String], prefix: String, limit: Int) -> SearchResult {
    let matches = words.filter { $0.utf8.starts(with: prefix.utf8) }
    let first = matches.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }.prefix(limit)
    return SearchResult(prefix: prefix, count: matches.count, first: Array(first))
  }
}

/// One search's answer: the match count and the first names, sorted.
struct SearchResult: Sendable, Equatable {
  var prefix: String
  var count: Int
  var first: [String]
}
