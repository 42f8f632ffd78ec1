import CRunLoopShims
import Glibc

/// The descriptors a `SpawnedProcess` sets up for its child's three streams: what the child
/// gets as 0, 1 and 2 (`childEnds`, -1 to inherit), the parent's ends of the pipes
/// (`parentEnds`), and which of them this process opened and must close.
struct SpawnStreams {
  private(set) var childEnds: [Int32] = [-1, -1, -1]
  private(set) var parentEnds: [Int32?] = [nil, nil, nil]
  /// Child ends opened here (`/dev/null`, pipes): closed in the parent once the child has
  /// them, or when the spawn fails.
  private var opened: [Int32] = []

  /// Sets up stream `index` (0 input, 1 output, 2 error).
  mutating func prepare(
    _ stdio: SpawnedProcess.Stdio, for index: Int32, executable: String
  ) throws(LoopError) {
    let slot = Int(index)
    switch stdio {
    case .inherit:
      childEnds[slot] = -1
    case .null:
      let fd = try Syscall.retryingEINTR("open /dev/null", on: "stream \(index) of \(executable)") {
        crl_open_null()
      }
      opened.append(fd)
      childEnds[slot] = fd
    case .pipe:
      var fds: [Int32] = [-1, -1]
      try Syscall.retryingEINTR("pipe2", on: "stream \(index) of \(executable)") {
        crl_pipe_cloexec(&fds)
      }
      // The child reads its input and writes its output and error.
      let (child, parent) = index == 0 ? (fds[0], fds[1]) : (fds[1], fds[0])
      opened.append(child)
      parentEnds[slot] = parent
      childEnds[slot] = child
      try Syscall.retryingEINTR(
        "fcntl O_NONBLOCK", on: "fd \(parent), stream \(index) of \(executable)"
      ) {
        crl_set_nonblocking(parent)
      }
    case .fileDescriptor(let fd):
      // Bounded well below Int32.max: the child's file actions go through descriptors just
      // above the largest one given.
      guard fd >= 0, fd < 1 << 24 else {
        throw .invalidArgument(
          name: "stream \(index) of \(executable)", value: "\(fd)",
          reason: "a file descriptor is between 0 and 2^24")
      }
      childEnds[slot] = fd
    }
  }

  /// After the spawn: the child has its own copies of what was opened for it.
  func closeChildEnds() { for fd in opened { close(fd) } }

  /// After a failed spawn: nothing opened here stays open.
  func closeAll() {
    closeChildEnds()
    for fd in parentEnds.compactMap({ $0 }) { close(fd) }
  }
}
