import CRunLoopShims
import Foundation
import Glibc
import Testing

@testable import RunLoopDemos
@testable import RunLoopKit

/// Starts `/bin/sh -c script` (nothing reaps it but the test), with no signal blocked and
/// every action at its default, and returns its process ID.
func spawnShell(_ script: String) throws -> pid_t {
  try SpawnedProcess(executable: "/bin/sh", arguments: ["-c", script]).processID
}

/// Whether `pid` is still running (not yet a zombie).
func processIsRunning(_ pid: pid_t) -> Bool {
  // Read with open and read: Foundation's file reading leaked its buffer (LeakSanitizer) when
  // the process went away during the read.
  let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
  guard fd >= 0 else { return false }
  defer { close(fd) }
  var bytes = [UInt8](repeating: 0, count: 1024)
  let count = read(fd, &bytes, bytes.count)
  guard count > 0 else { return false }
  let stat = String(decoding: bytes[..<count], as: UTF8.self)
  guard let name = stat.lastIndex(of: ")") else { return false }
  return !stat[stat.index(after: name)...].hasPrefix(" Z")
}

/// Whether `pid` still exists as a process (a zombie included).
func processExists(_ pid: pid_t) -> Bool {
  FileManager.default.fileExists(atPath: "/proc/\(pid)")
}

extension RunLoopKitTests {
  @Suite("Child-process sources") struct ChildProcessSources {
    @Test(
      "86. A child killed by a signal and one that exits 7 are each reported once, on the loop's thread, and reaped"
    )
    func test_86_exitStatusReported() throws {
      let thread = try ResidentThread(name: "child-watch")
      let reports = Box<[ChildProcessSource.Termination]>([])
      let onThread = Box(false)
      let done = Gate()
      let pid = try spawnShell("exec sleep 30")
      let source = try ChildProcessSource(processID: pid) { termination in
        reports.value.append(termination)
        onThread.value = thread.isCurrent
        done.open()
      }
      try thread.loop.add(source, to: .default)
      #expect(source.isValid)
      kill(pid, SIGHUP)
      #expect(done.wait())
      try thread.performAndWait {}
      #expect(reports.value == [.signalled(SIGHUP, coreDumped: false)])
      #expect(onThread.value)
      #expect(!source.isValid)
      #expect(!thread.loop.contains(source, in: .default))
      // Reaped: not our child any more, and gone from /proc.
      #expect(waitpid(pid, nil, WNOHANG) == -1 && errno == ECHILD)
      #expect(!processExists(pid))

      let exits = Gate()
      let status = Box<ChildProcessSource.Termination?>(nil)
      let seven = try spawnShell("exit 7")
      let sevenSource = try ChildProcessSource(processID: seven) { termination in
        status.value = termination
        exits.open()
      }
      try thread.loop.add(sevenSource, to: .default)
      #expect(exits.wait())
      #expect(status.value == .exited(7))
      #expect("\(status.value!)" == "exited with status 7")
      #expect(waitpid(seven, nil, WNOHANG) == -1 && errno == ECHILD)
      #expect(!processExists(seven))
    }

    @Test("86. A child that ended before its source was added is reported on the next pass")
    func test_86_alreadyEnded() throws {
      let pid = try spawnShell("exit 3")
      // Wait (without reaping) until it has ended.
      var info = siginfo_t()
      #expect(waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == 0)
      #expect(processExists(pid))  // a zombie until the source reaps it
      let status = Box<ChildProcessSource.Termination?>(nil)
      let thread = try ResidentThread(name: "child-late")
      let done = Gate()
      let source = try ChildProcessSource(processID: pid) { termination in
        status.value = termination
        done.open()
      }
      try thread.loop.add(source, to: .default)
      #expect(done.wait())
      #expect(status.value == .exited(3))
      #expect(!processExists(pid))
    }

    @Test("86. A process that is not a child, or no process, is refused with an error naming it")
    func test_86_notAChild() throws {
      do {
        _ = try ChildProcessSource(processID: 1) { _ in }
        Issue.record("pid 1 was accepted")
      } catch {
        #expect("\(error)".contains("process ID 1"), "\(error)")
        #expect("\(error)".contains("ECHILD"), "\(error)")
      }
      let pid = try spawnShell("exit 0")
      #expect(waitpid(pid, nil, 0) == pid)
      do {
        _ = try ChildProcessSource(processID: pid) { _ in }
        Issue.record("a reaped pid was accepted")
      } catch {
        #expect("\(error)".contains("\(pid)"), "\(error)")
      }
      #expect(throws: LoopError.self) { try ChildProcessSource(processID: 0) { _ in } }
    }

    @Test(
      "86. Invalidated before the child ends: the handler never runs, the child is left unreaped")
    func test_86_invalidatedEarly() throws {
      let thread = try ResidentThread(name: "child-early")
      let called = Counter()
      let pid = try spawnShell("exit 5")
      let source = try ChildProcessSource(processID: pid) { _ in called.increment() }
      source.invalidate()
      #expect(throws: LoopError.self) { try thread.loop.add(source, to: .default) }
      #expect(waitpid(pid, nil, 0) == pid)  // still ours to reap
      try thread.performAndWait {}
      #expect(called.value == 0)
    }

    @Test(
      "86. Invalidated from another thread while its child ends: the handler runs at most once, and a child it did not report is still ours to reap"
    )
    func test_86_invalidationRacesTheExit() throws {
      let thread = try ResidentThread(name: "child-race")
      for round in 0..<40 {
        let reported = Counter()
        let pid = try spawnShell("exit 0")
        let source = try ChildProcessSource(processID: pid) { _ in reported.increment() }
        try thread.loop.add(source, to: .default)
        // Half the rounds let the exit get a head start.
        if round % 2 == 0 { _ = waitUntil(seconds: 0.05) { !processIsRunning(pid) } }
        source.invalidate()
        try thread.performAndWait {}
        #expect(reported.value <= 1)
        #expect(!source.isValid)
        if reported.value == 1 {
          #expect(waitpid(pid, nil, WNOHANG) == -1 && errno == ECHILD)
        } else {
          #expect(waitpid(pid, nil, 0) == pid, "round \(round): the child was reaped unreported")
        }
      }
    }

    @Test(
      "86. Forced: invalidated on another thread after the child was reaped and before the handler's own invalidation: reported once, pidfd closed once"
    )
    func test_86_invalidatedBetweenReapAndReport() throws {
      let thread = try ResidentThread(name: "child-forced")
      let reports = Box<[ChildProcessSource.Termination]>([])
      let pid = try spawnShell("exit 9")
      let source = try ChildProcessSource(processID: pid) { ended in reports.value.append(ended) }
      let (arrived, release) = holdAt(.childReaped, for: source.source)
      try thread.loop.add(source, to: .default)
      #expect(arrived.wait())
      let before = openDescriptorCount()
      source.invalidate()  // the first invalidation: it detaches and closes the pidfd
      #expect(openDescriptorCount() == before - 1)
      release.open()
      try thread.performAndWait {}
      #expect(reports.value == [.exited(9)])
      #expect(openDescriptorCount() == before - 1)
      #expect(waitpid(pid, nil, WNOHANG) == -1 && errno == ECHILD)
    }
  }
}
