import Foundation
import Glibc
import RunLoopKitExecutors
import Testing

extension RunLoopKitTests {
  /// Checklist line 64, end to end: `loop-main-example` opts in with
  /// `typealias DefaultExecutorFactory = LoopExecutorFactory` and is built with the flag that
  /// makes the compiler honour it. `swift test` builds it next to this test binary.
  @Suite("The program's main executor") struct MainExecutorExample {
    @Test(
      "64. A program that opts in runs its main task, @MainActor code and DispatchQueue.main on Loop.main, and exits with status 0 when main returns"
    )
    func exampleRunsOnLoopMain() throws {
      let (status, output) = try runExample()
      #expect(status == .exited(0), "output:\n\(output)")
      // Every step after the first suspension runs on the main thread inside Loop.main.run;
      // the main task's first slice runs on the main thread before the runtime starts the loop.
      #expect(
        lines(output) == [
          "main task: main thread, Loop.main not running",
          "@MainActor: main thread, Loop.main running default",
          "Task.sleep(20 ms), 1 Loop.main timer: main thread, Loop.main running default",
          "LoopTimer: main thread, Loop.main running default",
          "DescriptorSource (byte 42 from another thread): main thread, Loop.main running default",
          "DispatchQueue.main: main thread, Loop.main running default",
          "main returns: main thread, Loop.main running default",
        ])
    }

    @Test("64. A main that throws ends the program with a failure naming the error, not status 0")
    func throwingMainFails() throws {
      let (status, output) = try runExample(arguments: ["--throw"], mergingStandardError: true)
      #expect(status != .exited(0))
      #expect(output.contains("Error raised at top level: example failure 3"), "\(output)")
    }

    @Test(
      "A nested run inside a main-actor job runs plain blocks but no other main-actor job or main-queue block; they run after it"
    )
    func nestedRunInMainActorJob() throws {
      // The first job holds a main-actor global `inout` across the nested run: a second job
      // run inside it would abort the program ("Simultaneous accesses").
      let (status, output) = try runExample(arguments: ["--nested-run"])
      #expect(status == .exited(0), "output:\n\(output)")
      let steps = lines(output).map { String($0.prefix { $0 != ":" }) }
      #expect(
        steps.prefix(4) == [
          "main task",
          "first main-actor job begins",
          "plain block in the nested run",
          "first main-actor job ends, counter 10",
        ])
      // The two held back run next. Main-actor jobs and main-queue blocks are two queues,
      // not ordered with respect to each other (see SwiftConcurrency.md), so either may come first.
      #expect(
        Set(steps.dropFirst(4).prefix(2)) == [
          "second main-actor job, counter 11", "main-queue block",
        ])
      #expect(steps.dropFirst(6) == ["main returns, counter 11"])
    }

    @Test("A stray Loop.main.stop() ends one run of the loop, not the program")
    func strayStopsDoNotEndTheProgram() throws {
      let (status, output) = try runExample(arguments: ["--stray-stop"])
      #expect(status == .exited(0))
      #expect(
        lines(output) == [
          "main task: main thread, Loop.main not running",
          "Loop.main.stop() from DispatchQueue.main: main thread, Loop.main running default",
          "Loop.main.stop() from a main-actor job: main thread, Loop.main running default",
          "main returns: main thread, Loop.main running default",
        ])
    }

    @Test(
      "64. The example reports the factory as installed; this test binary, without it, does not")
    func installationIsDetected() throws {
      let (status, output) = try runExample(arguments: ["--check-only"])
      #expect(status == .exited(0))
      #expect(output == "factory installed: true\n")
      // This test binary has no typealias: the runtime's own main executor is in place.
      #expect(!LoopExecutorFactory.isInstalled)
    }

    private func lines(_ output: String) -> [String] {
      output.split(separator: "\n").map(String.init)
    }
  }
}

/// How a child process ended.
enum ChildStatus: Equatable {
  case exited(Int32)
  case signalled(Int32)
}

/// Runs the example with popen (Foundation's Process leaks under LeakSanitizer) and returns how
/// it ended and its standard output (with standard error too, if asked).
func runExample(
  arguments: [String] = [], mergingStandardError: Bool = false
) throws -> (ChildStatus, String) {
  let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
  let example = directory.appendingPathComponent("loop-main-example").path
  guard FileManager.default.isExecutableFile(atPath: example) else {
    throw ExampleMissing(path: example)
  }
  var command = ([example] + arguments).map { "'\($0)'" }.joined(separator: " ")
  // No backtrace: a crash report is long and slow to make, and only its first line matters.
  command = "SWIFT_BACKTRACE=enable=no " + command + (mergingStandardError ? " 2>&1" : "")
  guard let pipe = popen(command, "r") else { throw ExampleMissing(path: example) }
  var output = ""
  var line = [CChar](repeating: 0, count: 4096)
  while fgets(&line, Int32(line.count), pipe) != nil {
    output += String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
  // pclose returns a wait status (the shell execs the command, so it is the example's own).
  let status = pclose(pipe)
  let signal = status & 0x7f
  return (signal == 0 ? .exited((status >> 8) & 0xff) : .signalled(signal), output)
}

struct ExampleMissing: Error, CustomStringConvertible {
  let path: String
  var description: String {
    "\(path) is missing or not executable: build it with `swift build` (`swift test` does)"
  }
}
