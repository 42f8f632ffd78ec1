/// A mode's registered descriptor sources by epoll token: a dictionary, with a small
/// direct-mapped cache in front of it for the lookups on the wake path. Each event a wait
/// returns is looked up three times (to name what woke the loop, to attribute it, to take its
/// handler); the dictionary hashes its key with SipHash every time, ~150 instructions a lookup (callgrind),
/// while the cache compares one token. Tokens are handed out in sequence, so the sources of a
/// mode rarely share a cache slot.
///
/// A class, held by a `let`: a struct in a mode's `var` is copied for each lookup (a retain
/// and a release of both its buffers), which the wake path cannot afford.
final class DescriptorTable {  // guarded by the loop's lock, like the rest of `ModeState`
  @exclusivity(unchecked) private var sources: [UInt64: DescriptorSource] = [:]
  /// Slot `token % cacheSize` holds the last source stored under a token with that remainder,
  /// or nothing; never a token the dictionary does not hold. A lookup that misses does not
  /// fill it, so of two sources whose tokens share a slot, the older is always looked up in
  /// the dictionary.
  /// Unretained: the dictionary holds every source the cache names, so reading one through
  /// the cache in place (`withSource`) costs no reference count.
  @exclusivity(unchecked) private var cache = [
    (token: UInt64, source: Unmanaged<DescriptorSource>?)
  ](
    repeating: (0, nil), count: DescriptorTable.cacheSize)
  private static let cacheSize = 16

  var isEmpty: Bool { sources.isEmpty }
  var count: Int { sources.count }

  subscript(token: UInt64) -> DescriptorSource? {
    get {
      let slot = Int(truncatingIfNeeded: token % UInt64(Self.cacheSize))
      if cache[slot].token == token, let source = cache[slot].source {
        return source.takeUnretainedValue()
      }
      return sources[token]
    }
    set {
      #if DEBUG
        precondition(borrowed != token, "a source was removed while withSource lent it out")
      #endif
      let slot = Int(truncatingIfNeeded: token % UInt64(Self.cacheSize))
      sources[token] = newValue
      if let newValue {
        cache[slot] = (token, Unmanaged.passUnretained(newValue))
      } else if cache[slot].token == token {
        cache[slot] = (0, nil)
      }
    }
  }

  /// `body` applied to the source registered under `token`, borrowed where it lies (from the
  /// cache, no reference counted; a miss goes through the dictionary, which counts one); nil
  /// when none is. `body` must not remove that source from the table: the table's reference
  /// is the one that keeps it alive meanwhile (debug builds check).
  func withSource<Result>(_ token: UInt64, _ body: (DescriptorSource) -> Result) -> Result? {
    #if DEBUG
      borrowed = token
      defer { borrowed = nil }
    #endif
    let slot = Int(truncatingIfNeeded: token % UInt64(Self.cacheSize))
    if cache[slot].token == token, let source = cache[slot].source {
      return source._withUnsafeGuaranteedRef(body)
    }
    return sources[token].map(body)
  }

  #if DEBUG
    /// The token `withSource` is lending out, which the setter must not remove or replace.
    @exclusivity(unchecked) private var borrowed: UInt64?
  #endif

  /// Every token and its source, in no particular order.
  var entries: [(key: UInt64, value: DescriptorSource)] { sources.map { ($0.key, $0.value) } }
}
