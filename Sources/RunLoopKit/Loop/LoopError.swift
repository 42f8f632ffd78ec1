/// Everything RunLoopKit's throwing calls can report.
///
/// CFRunLoop ignores most of these cases silently (adding a timer to a second run loop is a
/// no-op there); RunLoopKit refuses them loudly so nothing fails without the caller knowing.
public enum LoopError: Error, Equatable, Sendable, CustomStringConvertible {
  /// A system call failed; carries the call, the value it was applied to and the errno.
  case system(SystemError)
  /// The item is already bound to another loop (every item belongs to one loop for life).
  case boundToAnotherLoop(item: String)
  /// The item was invalidated and can no longer be scheduled or used.
  case invalidated(item: String)
  /// The loop's thread has exited and the loop was torn down; nothing can be added or posted.
  case loopTornDown(thread: String)
  /// A mode name that cannot be used (empty, or `.common` where a real mode is required).
  case invalidMode(name: String)
  /// A value that cannot be used: what it was for, the value, and the rule it broke (a
  /// timer interval that is not positive, a thread name over 15 bytes, a stack size below
  /// 16 KiB, a descriptor the loop owns itself, …).
  case invalidArgument(name: String, value: String, reason: String)
  /// Work was sent to a resident thread after `stop()`; it was not accepted.
  case stopped(thread: String)
  /// The call would wait for the calling thread itself (joining a thread from inside it).
  case calledOnOwnThread(operation: String, thread: String)

  /// A sentence that says what went wrong and, where it helps, what to do instead.
  public var description: String {
    switch self {
    case .system(let error):
      return error.description
    case .boundToAnotherLoop(let item):
      return
        "\(item) already belongs to another loop; an item is bound to the first loop it is added to"
    case .invalidated(let item):
      return "\(item) was invalidated and cannot be used again; create a new one"
    case .loopTornDown(let thread):
      return "the loop of \(thread) was torn down when its thread exited"
    case .invalidMode(let name):
      return name.isEmpty
        ? "mode name \"\" cannot be used: a mode needs a non-empty name"
        : "mode \"\(name)\" cannot be used here: .common names the set of common modes, "
          + "which items can join but which is never run itself; run a real mode"
    case .invalidArgument(let name, let value, let reason):
      return "\(name) \(value) is not valid: \(reason)"
    case .stopped(let thread):
      return "resident thread \"\(thread)\" was stopped; the work was not accepted"
    case .calledOnOwnThread(let operation, let thread):
      return "\(operation) was called on thread \"\(thread)\" itself, which would wait forever"
    }
  }
}
