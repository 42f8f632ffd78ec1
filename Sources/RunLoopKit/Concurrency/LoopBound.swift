/// A value that may only be used on one loop's thread, carried by a type that is `Sendable`:
/// the way to keep non-Sendable state (a connection, a database handle, search results) on the
/// thread that owns it and still capture it in the loop's callbacks, with no
/// `@unchecked Sendable` in your code. Mirrors SwiftNIO's `NIOLoopBound`; CF has no
/// counterpart (its callbacks take an untyped `info` pointer and trust the caller).
///
/// The wrapper itself can go anywhere — into a `@Sendable` closure, another thread, an
/// actor — but `value` can be read or changed only on `loop`'s thread; anywhere else it traps
/// with a message naming both threads.
///
/// The check guards the way in, not what you do with the value once you hold it: a reference
/// read out on the loop's thread is an ordinary value to the compiler, which will let you send
/// it on (into another loop's `perform`, say). SwiftNIO's `NIOLoopBound` has the same limit.
/// Use the value where you read it, and hand results back as Sendable copies.
///
/// ```swift
/// let results = try thread.performAndWait {
///   LoopBound(SearchResults(), loop: .current)   // made on the thread it belongs to
/// }
/// let timer = try LoopTimer(after: .seconds(1), repeating: .seconds(1)) { _ in
///   results.value.refresh()                      // a timer on that thread: allowed
/// }
/// try thread.loop.add(timer, to: .common)
/// let count = try thread.performAndWait { results.value.count }  // hand the work over
/// ```
///
/// `LoopBound` is a struct: a copy holds its own `value` (for a class, the same object).
/// For one mutable value shared by several callbacks, use ``LoopBoundBox``.
public struct LoopBound<Value>: @unchecked Sendable {  // each access checks loop.isCurrent
  /// The loop whose thread owns the value.
  public let loop: Loop
  private var stored: Value

  /// Binds `value`, made on `loop`'s thread, to that loop. Traps when called elsewhere: a
  /// value that lives on another thread cannot be handed over this way (use
  /// `init(sending:to:)` for a value nothing else refers to).
  public init(_ value: Value, loop: Loop) {
    loop.preconditionIsCurrent("LoopBound<\(Value.self)>.init(_:loop:)")
    self.loop = loop
    self.stored = value
  }

  /// Hands `value` to `loop` from any thread. `sending` makes the compiler check that the
  /// caller keeps no other reference to it (or to anything it refers to), so from now on only
  /// `loop`'s thread can reach it.
  public init(sending value: sending Value, to loop: Loop) {
    self.loop = loop
    self.stored = value
  }

  /// Binds `value` to a resident thread's loop; see `init(_:loop:)`.
  public init(_ value: Value, thread: ResidentThread) {
    self.init(value, loop: thread.loop)
  }

  /// Hands `value` to a resident thread's loop from any thread; see `init(sending:to:)`.
  public init(sending value: sending Value, to thread: ResidentThread) {
    self.init(sending: value, to: thread.loop)
  }

  /// The value. Only on `loop`'s thread: reading or writing it anywhere else traps with a
  /// message naming both threads.
  public var value: Value {
    get {
      loop.preconditionIsCurrent("reading LoopBound<\(Value.self)>.value")
      return stored
    }
    _modify {
      loop.preconditionIsCurrent("changing LoopBound<\(Value.self)>.value")
      yield &stored
    }
  }
}
