import Glibc
import RunLoopKit

/// A pipe nobody writes, its read end watched by a descriptor source in a loop's default mode:
/// it never fires, but the mode now has a descriptor, so every look the loop makes in it is an
/// `epoll_wait`, as the C floors' always are.
final class IdlePipe {
  private let source: DescriptorSource
  private let ends: (read: Int32, write: Int32)

  init(on loop: Loop) throws {
    var fds: [Int32] = [-1, -1]
    guard pipe(&fds) == 0 else {
      throw ScalingError(description: "pipe failed with errno \(errno)")
    }
    ends = (fds[0], fds[1])
    source = DescriptorSource(fileDescriptor: fds[0], interest: .readable) { _, _ in
      preconditionFailure("nobody writes the idle pipe")
    }
    do {
      try loop.add(source, to: .default)
    } catch {
      Glibc.close(fds[0])
      Glibc.close(fds[1])
      throw error
    }
  }

  /// Invalidates the source, then closes both ends (on the loop's thread).
  func close() {
    source.invalidate()
    Glibc.close(ends.read)
    Glibc.close(ends.write)
  }
}
