import CRunLoopShims
import Glibc
import RunLoopKit
import Testing

/// Runs `process` to its end on the calling thread's loop: reads its piped output and error
/// to their ends through descriptor sources and learns its termination. At most 10 s.
func collect(
  _ process: SpawnedProcess, on loop: Loop
) throws -> (output: String, error: String, termination: ChildProcessSource.Termination?) {
  var output: [UInt8] = []
  var error: [UInt8] = []
  var termination: ChildProcessSource.Termination?
  var open = 0
  let view = loop.assumeIsolated()
  for (fd, isOutput) in [(process.standardOutput, true), (process.standardError, false)] {
    guard let fd else { continue }
    open += 1
    try view.addSource(fileDescriptor: fd) { source, _ in
      var buffer = [UInt8](repeating: 0, count: 4096)
      while true {
        let count = read(fd, &buffer, buffer.count)
        if count > 0 {
          if isOutput { output += buffer[0..<count] } else { error += buffer[0..<count] }
          continue
        }
        if count == 0 {  // the end
          source.invalidate()
          open -= 1
        }
        return
      }
    }
  }
  try view.addChildProcessSource(processID: process.processID) { termination = $0 }
  let deadline = LoopClock.Instant.now.advanced(by: .seconds(10))
  while (open > 0 || termination == nil) && LoopClock.Instant.now < deadline {
    loop.run(in: .default, until: deadline, returnAfterSourceHandled: true)
  }
  process.closeStandardStreams()
  return (
    String(decoding: output, as: UTF8.self), String(decoding: error, as: UTF8.self), termination
  )
}

extension RunLoopKitTests {
  @Suite("SpawnedProcess: children with pipes") struct SpawnedProcesses {
    @Test(
      "116. sh -c 'echo out; echo err >&2; exit 3' with both streams piped: the loop reads exactly out and err and learns .exited(3)"
    )
    func pipedStreamsAndExit() throws {
      let result = try onLoopThread { loop in
        let child = try SpawnedProcess(
          executable: "sh", arguments: ["-c", "echo out; echo err >&2; exit 3"],
          standardOutput: .pipe, standardError: .pipe)
        #expect(child.standardInput == nil)
        return try collect(child, on: loop)
      }
      #expect(result.output == "out\n")
      #expect(result.error == "err\n")
      #expect(result.termination == .exited(3))
    }

    @Test("Article: Programs on loops, a child process with pipes")
    func articleSnippet() throws {
      let (output, ended) = try onLoopThread { loop -> (String, Bool) in
        var ended = false
        // --- ProgramsOnLoops.md: a child process with pipes ---
        let child = try SpawnedProcess(
          executable: "sh", arguments: ["-c", "echo out; echo err >&2; exit 3"],
          standardOutput: .pipe, standardError: .pipe)
        let view = loop.assumeIsolated()
        var output: [UInt8] = []
        try view.addSource(fileDescriptor: child.standardOutput!) { source, _ in
          var buffer = [UInt8](repeating: 0, count: 4096)
          let count = read(child.standardOutput!, &buffer, buffer.count)
          if count > 0 { output += buffer[0..<count] } else { source.invalidate() }
        }
        try view.addChildProcessSource(processID: child.processID) { termination in
          print("child \(termination)")  // "child exited with status 3"
        }
        // --- end ---
        try view.addChildProcessSource(processID: child.processID) { _ in ended = true }
        let deadline = LoopClock.Instant.now.advanced(by: .seconds(10))
        while !ended && LoopClock.Instant.now < deadline {
          loop.run(in: .default, until: deadline, returnAfterSourceHandled: true)
        }
        loop.run(in: .default, for: .milliseconds(50))
        child.closeStandardStreams()
        return (String(decoding: output, as: UTF8.self), ended)
      }
      #expect(output == "out\n")
      #expect(ended)
    }

    @Test("116. A child spawned from a thread that blocks SIGTERM dies of kill -TERM")
    func childStartsWithNoSignalBlocked() throws {
      let termination = try onLoopThread { loop -> ChildProcessSource.Termination? in
        var blocked = sigset_t()
        sigemptyset(&blocked)
        sigaddset(&blocked, SIGTERM)
        pthread_sigmask(SIG_BLOCK, &blocked, nil)
        let child = try SpawnedProcess(executable: "sleep", arguments: ["30"])
        kill(child.processID, SIGTERM)
        return try collect(child, on: loop).termination
      }
      #expect(termination == .signalled(SIGTERM, coreDumped: false))
    }

    @Test(
      "116. A child sees no descriptor of the parent's but its three streams, even one opened without close-on-exec"
    )
    func noDescriptorLeaks() throws {
      let leaked = dup(2)  // no O_CLOEXEC
      defer { close(leaked) }
      let output = try onLoopThread { loop in
        let child = try SpawnedProcess(
          executable: "/bin/sh",
          arguments: [
            "-c",
            "for fd in 0 1 2 \(leaked); do [ -e /proc/$$/fd/$fd ] && echo open $fd || echo closed $fd; done",
          ],
          standardInput: .null, standardOutput: .pipe)
        return try collect(child, on: loop).output
      }
      #expect(output == "open 0\nopen 1\nopen 2\nclosed \(leaked)\n")
    }

    @Test(
      "116. The environment, the working directory, /dev/null and a given descriptor reach the child"
    )
    func environmentDirectoryAndDescriptors() throws {
      let (readEnd, writeEnd) = makePipe()
      defer { close(readEnd) }
      let output = try onLoopThread { loop in
        let child = try SpawnedProcess(
          executable: "sh", arguments: ["-c", "pwd; echo $GREETING; cat; echo to-fd >&2"],
          environment: ["GREETING": "hello", "PATH": "/usr/bin:/bin"], workingDirectory: "/tmp",
          standardInput: .null, standardOutput: .pipe, standardError: .fileDescriptor(writeEnd))
        return try collect(child, on: loop).output
      }
      close(writeEnd)
      #expect(output == "/tmp\nhello\n")
      var buffer = [UInt8](repeating: 0, count: 64)
      let count = read(readEnd, &buffer, 64)
      #expect(String(decoding: buffer[0..<max(count, 0)], as: UTF8.self) == "to-fd\n")
    }

    @Test(
      "116. A missing executable, one that is not executable, and a missing working directory throw naming them, and leave nothing open"
    )
    func spawnFailuresThrow() throws {
      let before = openDescriptorCount()
      #expect(throws: LoopError.self) {
        _ = try SpawnedProcess(executable: "no-such-program-46", standardOutput: .pipe)
      }
      do {
        _ = try SpawnedProcess(executable: "/no/such/program", standardError: .pipe)
      } catch {
        #expect("\(error)".contains("/no/such/program"), "\(error)")
        #expect(
          error
            == .system(
              SystemError(operation: "posix_spawn", subject: "/no/such/program", errno: ENOENT)))
      }
      var template = Array("/tmp/runloopkit-not-executable-XXXXXX".utf8CString)
      let file = mkstemp(&template)
      let path = template.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
      defer { unlink(path) }
      fchmod(file, 0o644)
      close(file)
      let notExecutable = openDescriptorCount()
      do {
        _ = try SpawnedProcess(executable: path, standardInput: .pipe)
      } catch {
        #expect(
          error == .system(SystemError(operation: "posix_spawn", subject: path, errno: EACCES)))
      }
      #expect(openDescriptorCount() == notExecutable)
      do {
        _ = try SpawnedProcess(
          executable: "sh", workingDirectory: "/no/such/dir", standardOutput: .null)
      } catch {
        #expect("\(error)".contains("/no/such/dir"), "\(error)")
      }
      #expect(throws: LoopError.self) {
        _ = try SpawnedProcess(executable: "sh", standardOutput: .fileDescriptor(-1))
      }
      #expect(openDescriptorCount() == before)
    }
  }
}

extension RunLoopKitTests {
  @Suite("IsolatedLoop.watch: a spawned child from its loop") struct WatchSpawned {
    @Test(
      "118. view.watch(process) hands over each piped stream as it is read, an empty array at each end, and tells the exit after both ends, whatever the volume"
    )
    func watchTellsExitAfterTheStreams() throws {
      let (events, bytes) = try onLoopThread { loop -> ([String], Int) in
        var events: [String] = []
        var bytes = 0
        var done = false
        let child = try SpawnedProcess(
          executable: "sh", arguments: ["-c", "head -c 300000 /dev/zero; echo err >&2; exit 3"],
          standardOutput: .pipe, standardError: .pipe)
        try loop.assumeIsolated().watch(
          child,
          output: { chunk in
            bytes += chunk.count
            if chunk.isEmpty { events.append("output ended") }
          },
          error: { chunk in
            events.append(chunk.isEmpty ? "error ended" : String(decoding: chunk, as: UTF8.self))
          },
          exit: { termination in
            events.append("exit: \(termination)")
            done = true
          })
        let deadline = LoopClock.Instant.now.advanced(by: .seconds(10))
        while !done && LoopClock.Instant.now < deadline {
          loop.run(in: .default, until: deadline, returnAfterSourceHandled: true)
        }
        child.closeStandardStreams()
        child.closeStandardStreams()  // a second call closes nothing
        return (events, bytes)
      }
      #expect(bytes == 300_000)
      #expect(events.last == "exit: exited with status 3")
      #expect(Set(events.dropLast()) == ["output ended", "err\n", "error ended"])
      #expect(events.firstIndex(of: "err\n")! < events.firstIndex(of: "error ended")!)
    }
  }
}
