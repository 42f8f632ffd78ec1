import Synchronization

/// Where `runTask`'s task leaves its result, for the driving thread to find once `end` says
/// the task has ended.
final class VirtualTaskOutcome<Success: Sendable>: Sendable {
  private let stored = Mutex<Result<Success, any Error>?>(nil)
  let end = VirtualTaskEnd()

  /// On the loop's thread, as the task's last act.
  func finish(_ result: Result<Success, any Error>) {
    stored.withLock { $0 = result }
    end.mark()
  }

  /// The task's result; nil until it has ended.
  var result: Result<Success, any Error>? { stored.withLock { $0 } }
}

/// Whether `runTask`'s task has ended: one flag, read between every two passes of the drive
/// (not generic, so reading it looks no type metadata up).
final class VirtualTaskEnd: Sendable {
  private let flag = Atomic<Bool>(false)

  /// Release: a reader that sees the flag set finds the result stored.
  func mark() { flag.store(true, ordering: .releasing) }

  var happened: Bool { flag.load(ordering: .acquiring) }
}
