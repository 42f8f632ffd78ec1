/// A match of a search query inside a name, with the characters that matched.
public struct SearchMatch: Sendable, Equatable, CustomStringConvertible {
  public let name: String
  /// Runs of matched characters, as character offsets into `name`.
  public let ranges: [Range<Int>]
  /// Lower is better: fewer runs, runs that start words, an earlier start.
  public let score: Int

  /// The name with each matched run in brackets: "CF[RunLoop]Timer".
  public var highlighted: String {
    var result = ""
    for (offset, character) in name.enumerated() {
      if ranges.contains(where: { $0.lowerBound == offset }) { result += "[" }
      result.append(character)
      if ranges.contains(where: { $0.upperBound == offset + 1 }) { result += "]" }
    }
    return result
  }

  public var description: String { highlighted }
}

/// Subsequence ("fuzzy") matching of a query against names, as a search box does it.
public enum FuzzyMatcher {
  /// A name prepared for matching: its ASCII letters lowercased, and where its words start.
  public struct Entry: Sendable {
    public let name: String
    let lowered: [UInt8]
    let wordStarts: [Bool]

    public init(_ name: String) {
      self.name = name
      let bytes = Array(name.utf8)
      lowered = bytes.map { $0 >= 65 && $0 <= 90 ? $0 + 32 : $0 }
      wordStarts = bytes.indices.map { index in
        index == 0 || (bytes[index] >= 65 && bytes[index] <= 90)
      }
    }
  }

  /// The names the search demo looks through: every three-word combination of run loop
  /// vocabulary, about 25 000 of them ("PortTimerWake", "LoopSourceRun"…).
  public static let corpus: [Entry] = {
    let words = [
      "CF", "NS", "Run", "Loop", "Timer", "Source", "Port", "Observer", "Mode", "Thread", "Queue",
      "Event", "Socket", "Stream", "Block", "Signal", "Wake", "Sleep", "Entry", "Exit", "Common",
      "Default", "Tracking", "Descriptor", "Epoll", "Mach", "Message", "Perform", "Stop", "Poll",
    ]
    var names: [Entry] = []
    for first in words {
      for second in words where second != first {
        for third in words where third != second { names.append(Entry(first + second + third)) }
      }
    }
    return names
  }()

  /// The best way `query` (lowercase ASCII) matches `entry`, or nil if it is not a subsequence.
  /// Tries every place the first character occurs and keeps the fewest, best-placed runs.
  public static func match(_ query: [UInt8], in entry: Entry) -> SearchMatch? {
    guard let first = query.first else { return nil }
    var best: (score: Int, ranges: [Range<Int>])?
    for start in entry.lowered.indices where entry.lowered[start] == first {
      guard let ranges = greedyRuns(query, in: entry.lowered, from: start) else { break }
      let wordStartRuns = ranges.filter { entry.wordStarts[$0.lowerBound] }.count
      let score = ranges.count * 100 - wordStartRuns * 30 + ranges[0].lowerBound
      if best == nil || score < best!.score { best = (score, ranges) }
    }
    return best.map { SearchMatch(name: entry.name, ranges: $0.ranges, score: $0.score) }
  }

  /// Matches each query byte at the first place it occurs after the previous one.
  static func greedyRuns(_ query: [UInt8], in text: [UInt8], from start: Int) -> [Range<Int>]? {
    var ranges: [Range<Int>] = []
    var position = start
    for byte in query {
      while position < text.count && text[position] != byte { position += 1 }
      guard position < text.count else { return nil }
      if let last = ranges.last, last.upperBound == position {
        ranges[ranges.count - 1] = last.lowerBound..<(position + 1)
      } else {
        ranges.append(position..<(position + 1))
      }
      position += 1
    }
    return ranges
  }

  /// Keeps the `limit` best matches seen, best first.
  public static func keepBest(_ best: inout [SearchMatch], adding match: SearchMatch, limit: Int) {
    let index =
      best.firstIndex {
        (match.score, match.name.count, match.name) < ($0.score, $0.name.count, $0.name)
      } ?? best.count
    guard index < limit else { return }
    best.insert(match, at: index)
    if best.count > limit { best.removeLast() }
  }

  /// The best matches of `query` over all of `entries` in one go (what the demo's sliced,
  /// interruptible search must agree with).
  public static func best(_ query: String, in entries: [Entry], limit: Int) -> [SearchMatch] {
    let bytes = Array(query.lowercased().utf8)
    var best: [SearchMatch] = []
    for entry in entries {
      if let match = match(bytes, in: entry) { keepBest(&best, adding: match, limit: limit) }
    }
    return best
  }
}
