/// A spawned child watched from the loop it lives on: its piped streams read as they come,
/// and its exit told after them.
extension IsolatedLoop {
  /// Watches `process` in `mode`: what its piped standard output and standard error write is
  /// handed to `output` and `error` as it is read (an empty array once, at each stream's
  /// end), and `exit` is called once with how it ended — after both streams have ended, so
  /// nothing it wrote arrives after its exit is told. A stream that is not piped is not
  /// watched. The handlers run on the loop's thread and may capture and mutate its state.
  ///
  /// The pipes' parent ends stay open (the process's `closeStandardStreams()` closes them);
  /// each source is invalidated at its stream's end.
  ///
  /// - Returns: the exit's source, to stop watching with `invalidate()` (the streams' sources
  ///   are stopped by their ends).
  /// - Throws: as `addSource(fileDescriptor:)` and `addChildProcessSource(processID:)`; what
  ///   was added before the error is invalidated.
  @discardableResult
  public func watch(
    _ process: SpawnedProcess, to mode: Loop.Mode = .default,
    isolation: (any Actor)? = #isolation,
    output: @escaping ([UInt8]) -> Void = { _ in }, error: @escaping ([UInt8]) -> Void = { _ in },
    exit: @escaping (ChildProcessSource.Termination) -> Void
  ) throws(LoopError) -> ChildProcessSource {
    check("watch(_:to:output:error:exit:)", isolation)
    var openStreams = 0
    var termination: ChildProcessSource.Termination?
    func tellExitWhenDone() {
      guard openStreams == 0, let ended = termination else { return }
      termination = nil
      exit(ended)
    }
    var added: [DescriptorSource] = []
    do throws(LoopError) {
      for (fd, handler) in [(process.standardOutput, output), (process.standardError, error)] {
        guard let fd else { continue }
        openStreams += 1
        added.append(
          try addSource(fileDescriptor: fd, label: "child \(process.processID) fd \(fd)", to: mode)
          {
            source, _ in
            var buffer = [UInt8](repeating: 0, count: 16_384)
            while true {
              // nil: nothing more for now; 0: the end. A read error ends the stream too.
              let count = buffer.withUnsafeMutableBytes { bytes -> Int? in
                do throws(LoopError) {
                  return try Syscall.readAvailable(fd, into: bytes)
                } catch {
                  return 0
                }
              }
              guard let count else { return }
              if count > 0 {
                handler(Array(buffer[0..<count]))
                continue
              }
              source.invalidate()
              handler([])
              openStreams -= 1
              tellExitWhenDone()
              return
            }
          })
      }
      return try addChildProcessSource(
        processID: process.processID, label: "child \(process.processID)", to: mode
      ) { ended in
        termination = ended
        tellExitWhenDone()
      }
    } catch {
      for source in added { source.invalidate() }
      throw error
    }
  }
}
