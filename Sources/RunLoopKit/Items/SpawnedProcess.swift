import CRunLoopShims
import Glibc
import Synchronization

/// A child process started with its standard streams chosen one by one: inherited, sent to
/// `/dev/null`, piped to this process, or given a descriptor. Its exit is watched with a
/// `ChildProcessSource` on `processID`, and each pipe with a `DescriptorSource` on the
/// parent's end (`standardOutput`, …), which is non-blocking and close-on-exec.
///
/// ```swift
/// let child = try SpawnedProcess(
///   executable: "sh", arguments: ["-c", "echo out; exit 3"], standardOutput: .pipe)
/// let view = loop.assumeIsolated()
/// try view.addSource(fileDescriptor: child.standardOutput!) { source, events in … }
/// try view.addChildProcessSource(processID: child.processID) { termination in … }
/// ```
///
/// What the child gets, whatever thread spawns it: no signal blocked and every disposition
/// at its default (a loop's or Dispatch's thread blocks nearly every signal, and both survive
/// `exec`); no descriptor of this process but its three streams (not the loops' epoll sets
/// and eventfds, nor a descriptor other code opened without `O_CLOEXEC`). An executable
/// without a slash is looked up in this process's `PATH` (not `environment`'s), before the
/// working directory changes for the child; a relative path is resolved from the child's
/// working directory. A failed `exec` (no such file, not executable) is a thrown error, not a
/// child that exits 127: glibc's `posix_spawn` waits for the `exec`. Needs glibc 2.34 or
/// later (`posix_spawn_file_actions_addclosefrom_np`).
///
/// The parent's ends of the pipes belong to the caller, who closes them (`close(_:)`, or
/// `closeStandardStreams()`); a `DescriptorSource` does not close its descriptor.
///
/// Mirrors no CF type (CF starts no process). The counterparts are libuv's `uv_spawn` with
/// `UV_CREATE_PIPE` stdio and GLib's `g_spawn_async_with_pipes`; Foundation's `Process` with
/// `Pipe`s on Darwin.
public final class SpawnedProcess: Sendable {
  /// Where one of the child's standard streams goes.
  public enum Stdio: Sendable, Equatable {
    /// The parent's own descriptor of the same number.
    case inherit
    /// `/dev/null`.
    case null
    /// A pipe to this process; the parent's end is `standardInput`, `standardOutput` or
    /// `standardError`.
    case pipe
    /// This descriptor (left open in the parent).
    case fileDescriptor(Int32)
  }

  /// The child's process ID.
  public let processID: pid_t
  /// The parent's (write) end of the child's standard input, for `.pipe`.
  public let standardInput: Int32?
  /// The parent's (read) end of the child's standard output, for `.pipe`.
  public let standardOutput: Int32?
  /// The parent's (read) end of the child's standard error, for `.pipe`.
  public let standardError: Int32?

  /// Starts `executable` with `arguments` (not including the program name, which is
  /// `executable`'s), `environment` (nil: this process's), in `workingDirectory` (nil: this
  /// process's).
  ///
  /// - Throws: `LoopError.system` naming the executable and the errno when the process
  ///   cannot be started (`ENOENT` for a missing executable or working directory, `EACCES`
  ///   for one that is not executable), or when a pipe or `/dev/null` cannot be opened;
  ///   `LoopError.invalidArgument` for an empty executable or a negative descriptor.
  ///   Nothing is left open when it throws.
  public init(
    executable: String, arguments: [String] = [], environment: [String: String]? = nil,
    workingDirectory: String? = nil, standardInput: Stdio = .inherit,
    standardOutput: Stdio = .inherit, standardError: Stdio = .inherit
  ) throws(LoopError) {
    guard !executable.isEmpty else {
      throw .invalidArgument(name: "executable", value: "\"\"", reason: "a program to run")
    }
    var streams = SpawnStreams()
    do throws(LoopError) {
      for (index, stdio) in [standardInput, standardOutput, standardError].enumerated() {
        try streams.prepare(stdio, for: Int32(index), executable: executable)
      }
      processID = try SpawnedProcess.spawn(
        executable, arguments, environment, workingDirectory, streams.childEnds)
    } catch {
      streams.closeAll()
      throw error
    }
    streams.closeChildEnds()
    self.standardInput = streams.parentEnds[0]
    self.standardOutput = streams.parentEnds[1]
    self.standardError = streams.parentEnds[2]
  }

  /// Closes the parent's ends of the pipes, once: later calls do nothing (closing a number
  /// twice could close whatever reused it). Remove or invalidate the descriptor sources
  /// watching them first, and do not also close them yourself.
  public func closeStandardStreams() {
    guard !streamsClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
    for fd in [standardInput, standardOutput, standardError].compactMap({ $0 }) { close(fd) }
  }

  private let streamsClosed = Atomic<Bool>(false)

  private static func spawn(
    _ executable: String, _ arguments: [String], _ environment: [String: String]?,
    _ directory: String?, _ stdio: [Int32]
  ) throws(LoopError) -> pid_t {
    var argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) }
    argv.append(nil)
    defer { for pointer in argv { free(pointer) } }
    var envp: [UnsafeMutablePointer<CChar>?]? = environment.map { variables in
      variables.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
    }
    defer { for pointer in envp ?? [] { free(pointer) } }
    var pid: pid_t = 0
    let searchPath: Int32 = executable.contains("/") ? 0 : 1
    let result = stdio.withUnsafeBufferPointer { streams in
      argv.withUnsafeBufferPointer { argv in
        SpawnedProcess.withEnvironment(&envp) { envp in
          crl_spawn(
            &pid, executable, searchPath, argv.baseAddress, envp, directory, streams.baseAddress)
        }
      }
    }
    guard result == 0 else {
      throw .system(
        SystemError(
          operation: directory.map { "posix_spawn in \($0)" } ?? "posix_spawn",
          subject: executable, errno: result))
    }
    return pid
  }

  /// `envp` as C wants it, or NULL for this process's environment.
  private static func withEnvironment<T>(
    _ envp: inout [UnsafeMutablePointer<CChar>?]?,
    _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>?) -> T
  ) -> T {
    guard let variables = envp else { return body(nil) }
    return variables.withUnsafeBufferPointer { body($0.baseAddress) }
  }
}
