/// A mutable box whose contents may only be used on one loop's thread, itself `Sendable`:
/// several callbacks (a timer, a descriptor source, a perform block) can share it and change
/// its value, and the value never leaves the thread. Mirrors SwiftNIO's `NIOLoopBoundBox`; CF
/// has no counterpart.
///
/// Every access to `value` checks the thread and traps elsewhere, naming both threads. A box
/// can be made empty on any thread (its value is `nil`, which nothing else can refer to) and
/// filled later on the loop's thread:
///
/// ```swift
/// let connection = LoopBoundBox<Connection?>(emptyOn: thread.loop)
/// try thread.perform { connection.value = Connection(socket: fd) }
/// ```
public final class LoopBoundBox<Value>: @unchecked Sendable {  // each access checks loop.isCurrent
  /// The loop whose thread owns the value.
  public let loop: Loop
  private var stored: Value

  /// A box for `value`, made on `loop`'s thread. Traps when called elsewhere (use
  /// `init(sending:to:)` to hand over a value from another thread).
  public init(_ value: Value, loop: Loop) {
    loop.preconditionIsCurrent("LoopBoundBox<\(Value.self)>.init(_:loop:)")
    self.loop = loop
    self.stored = value
  }

  /// A box for `value`, handed to `loop` from any thread; `sending` makes the compiler check
  /// the caller keeps no other reference to it.
  public init(sending value: sending Value, to loop: Loop) {
    self.loop = loop
    self.stored = value
  }

  /// An empty box, from any thread: its value is `nil` until the loop's thread sets one.
  public init<Wrapped>(emptyOn loop: Loop) where Value == Wrapped? {
    self.loop = loop
    self.stored = nil
  }

  /// A box bound to a resident thread's loop; see `init(_:loop:)`.
  public convenience init(_ value: Value, thread: ResidentThread) {
    self.init(value, loop: thread.loop)
  }

  /// A box handed to a resident thread's loop from any thread; see `init(sending:to:)`.
  public convenience init(sending value: sending Value, to thread: ResidentThread) {
    self.init(sending: value, to: thread.loop)
  }

  /// The value. Only on `loop`'s thread: reading or writing it anywhere else traps with a
  /// message naming both threads.
  public var value: Value {
    get {
      loop.preconditionIsCurrent("reading LoopBoundBox<\(Value.self)>.value")
      return stored
    }
    _modify {
      loop.preconditionIsCurrent("changing LoopBoundBox<\(Value.self)>.value")
      yield &stored
    }
  }

  /// Runs `body` with the value in place (one thread check for several changes). Only on
  /// `loop`'s thread.
  public func withValue<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
    loop.preconditionIsCurrent("LoopBoundBox<\(Value.self)>.withValue")
    return try body(&stored)
  }
}
