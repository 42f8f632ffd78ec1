/// One mode's items of one kind (or the loop's common items), kept by identity: O(1) insert,
/// remove and membership.
///
/// The first version kept plain arrays and removed with a linear scan, so destroying 50 000
/// manual sources one by one (GLib's `nsources` test) took 10 s. The order items joined in is
/// kept as a sequence number for the few callers that need it: teardown's cancel callouts,
/// descriptions, the schedule callouts of a mode joining the common set, observer order.
/// Guarded by the owning loop's lock.
struct ItemSet<Element> {  // Element: a class, or an existential of a class-bound protocol
  struct Entry {
    /// When the item joined: later joins get larger numbers.
    let sequence: UInt64
    let element: Element
  }

  private var entries: [ObjectIdentifier: Entry] = [:]
  private var nextSequence: UInt64 = 0
  /// Inserts and removals made, for tests that check the cost of n of them stays linear.
  private(set) var steps = 0

  var count: Int { entries.count }
  var isEmpty: Bool { entries.isEmpty }

  /// The items in no particular order (for a walk whose result is sorted anyway).
  var unordered: some Collection<Element> { entries.values.lazy.map(\.element) }

  /// The items in the order they joined. O(n log n): for rare walks only.
  var inOrder: [Element] { orderedEntries.map(\.element) }

  /// The entries in the order they joined, with their sequence numbers.
  var orderedEntries: [Entry] { entries.values.sorted { $0.sequence < $1.sequence } }

  func contains(_ element: Element) -> Bool { entries[Self.key(element)] != nil }

  /// Adds `element` unless it is already in; returns whether it was added.
  @discardableResult
  mutating func insert(_ element: Element) -> Bool {
    steps += 1
    let key = Self.key(element)
    guard entries[key] == nil else { return false }
    entries[key] = Entry(sequence: nextSequence, element: element)
    nextSequence += 1
    return true
  }

  /// Removes `element`; returns whether it was in.
  @discardableResult
  mutating func remove(_ element: Element) -> Bool {
    steps += 1
    return entries.removeValue(forKey: Self.key(element)) != nil
  }

  /// The identity of the object `element` is (or holds, for an existential).
  private static func key(_ element: Element) -> ObjectIdentifier {
    ObjectIdentifier(element as AnyObject)
  }

  /// Empties the set and hands back what it held, so the caller can release it later.
  mutating func removeAll() -> [Element] {
    defer { entries = [:] }
    return inOrder
  }
}
