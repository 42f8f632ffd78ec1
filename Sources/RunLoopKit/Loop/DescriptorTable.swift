/// A mode's registered descriptor sources by epoll token: a dictionary, with a small
/// direct-mapped cache in front of it for the lookups on the wake path. Each event a wait
/// returns is looked up twice (to name what woke the loop, then to deliver it); the
/// dictionary hashes its key with SipHash every time, ~150 instructions a lookup (callgrind),
/// while the cache compares one token. Tokens are handed out in sequence, so the sources of a
/// mode rarely share a cache slot.
struct DescriptorTable {
  private var sources: [UInt64: DescriptorSource] = [:]
  /// Slot `token % cacheSize` holds the last source stored under a token with that remainder,
  /// or nothing; never a token the dictionary does not hold. A lookup that misses does not
  /// fill it, so of two sources whose tokens share a slot, the older is always looked up in
  /// the dictionary.
  private var cache = [(token: UInt64, source: DescriptorSource?)](
    repeating: (0, nil), count: DescriptorTable.cacheSize)
  private static let cacheSize = 16

  var isEmpty: Bool { sources.isEmpty }
  var count: Int { sources.count }

  subscript(token: UInt64) -> DescriptorSource? {
    get {
      let slot = Int(truncatingIfNeeded: token % UInt64(Self.cacheSize))
      if cache[slot].token == token, let source = cache[slot].source { return source }
      return sources[token]
    }
    set {
      let slot = Int(truncatingIfNeeded: token % UInt64(Self.cacheSize))
      sources[token] = newValue
      if let newValue {
        cache[slot] = (token, newValue)
      } else if cache[slot].token == token {
        cache[slot] = (0, nil)
      }
    }
  }

  /// Every token and its source, in no particular order.
  var entries: [(key: UInt64, value: DescriptorSource)] { sources.map { ($0.key, $0.value) } }
}
