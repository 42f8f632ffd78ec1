/// Carries a value that arrived as a `sending` parameter into the `@Sendable` closures and
/// fields the loop keeps (which must be Sendable to be stored in shared items and queues).
///
/// `@unchecked Sendable` is true here without a lock: `sending` makes the compiler prove the
/// caller keeps no access to the value (or to anything it captures), and the loop then uses
/// it on one thread at a time — a handler only on its loop's thread, a block once. Most APIs
/// store their `sending` closure directly (in a class whose state a lock guards); this box is
/// for the paths where the closure must first cross another closure (`ResidentThread`'s
/// delayed blocks, scheduled under the thread's own lock).
struct Transferred<Value>: @unchecked Sendable {  // `sending` proves no other access remains
  let value: Value
  init(_ value: consuming sending Value) { self.value = value }
}
