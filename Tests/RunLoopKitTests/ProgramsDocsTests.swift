import CRunLoopShims
import Glibc
import Testing

@testable import RunLoopKit

/// The snippets of ProgramsOnLoops.md and of KeepingAThreadAlive.md's group section, as tests.
extension RunLoopKitTests {
  @Suite("Programs: the docs' snippets") struct ProgramsDocs {
    @Test("86. The article's child snippet reports the worker's exit")
    func test_86_articleChildSnippet() throws {
      let printed = Box<[String]>([])
      @Sendable func print(_ line: String) { printed.value.append(line) }
      @Sendable func spawnWorkerProcess() throws -> pid_t { try spawnShell("exit 0") }
      try onLoopThread { loop in
        // --- ProgramsOnLoops.md: a child process's exit ---
        let child = try spawnWorkerProcess()  // any child of this process
        let watch = try ChildProcessSource(processID: child) { termination in
          print("worker \(termination)")  // "worker exited with status 0"
        }
        try loop.add(watch, to: .default)
        // --- end ---
        loop.run(for: .seconds(10), returnAfterSourceHandled: true)
      }
      #expect(printed.value == ["worker exited with status 0"])
      #expect(
        "\(ChildProcessSource.Termination.signalled(SIGKILL, coreDumped: false))"
          == "killed by SIGKILL")
    }

    @Test("85. KeepingAThreadAlive.md's group snippet spreads child tasks and stops cleanly")
    func test_85_articleGroupSnippet() async throws {
      let ran = Box<String?>(nil)
      @Sendable func work() { ran.value = threadName() }
      // --- KeepingAThreadAlive.md: several threads ---
      let workers = try ResidentThreadGroup(count: 4, name: "worker")
      try workers.next().perform { work() }  // round-robin: worker-0, worker-1, …
      let total = await withTaskExecutorPreference(workers.executor) {
        await withTaskGroup(of: Int.self) { children in  // children spread over the 4 threads
          for chunk in 0..<8 { children.addTask { chunk * chunk } }
          return await children.reduce(0, +)
        }
      }
      workers.stop()  // each thread runs what was posted to it before, then ends
      try workers.join()
      // --- end ---
      #expect(total == 140)
      #expect(ran.value == "worker-0")
    }
  }
}

/// The calling thread's kernel name.
private func threadName() -> String {
  var buffer = [CChar](repeating: 0, count: 16)
  _ = crl_get_thread_name(pthread_self(), &buffer, buffer.count)
  let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
  return String(decoding: bytes, as: UTF8.self)
}
