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
  /// A timer interval, tolerance or delay that is negative, zero where that makes no sense,
  /// NaN or infinite.
  case invalidInterval(name: String, value: String)

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
      return "the loop of thread \(thread) was torn down when its thread exited"
    case .invalidMode(let name):
      return "mode name \"\(name)\" cannot be used here"
    case .invalidInterval(let name, let value):
      return "\(name) \(value) is not valid: it must be finite and positive"
    }
  }
}
