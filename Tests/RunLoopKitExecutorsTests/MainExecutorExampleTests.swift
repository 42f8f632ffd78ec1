import Foundation
import Glibc
import RunLoopKitExecutors
import Testing

/// SEMANTICS 64, end to end: `loop-main-example` opts in with
/// `typealias DefaultExecutorFactory = LoopExecutorFactory` and is built with the flag that
/// makes the compiler honour it. `swift test` builds it next to this test binary.
@Suite("The program's main executor")
struct MainExecutorExampleTests {
  @Test(
    "64. A program that opts in runs its main task, @MainActor code and DispatchQueue.main on Loop.main, and exits with main's status"
  )
  func exampleRunsOnLoopMain() throws {
    let (status, output) = try runExample()
    #expect(status == 0, "exit status \(status); output:\n\(output)")
    let lines = output.split(separator: "\n").map(String.init)
    // Every step after the first suspension runs on the main thread inside Loop.main.run; the
    // main task's first slice runs on the main thread before the runtime starts the loop.
    let expected = [
      "main task: main thread, Loop.main not running",
      "@MainActor: main thread, Loop.main running default",
      "Task.sleep(20 ms), 1 Loop.main timer: main thread, Loop.main running default",
      "LoopTimer: main thread, Loop.main running default",
      "DescriptorSource (byte 42 from another thread): main thread, Loop.main running default",
      "DispatchQueue.main: main thread, Loop.main running default",
      "main returns: main thread, Loop.main running default",
    ]
    #expect(lines == expected)
  }

  @Test("64. The example reports the factory as installed; this test binary, without it, does not")
  func installationIsDetected() throws {
    let (status, output) = try runExample(arguments: ["--check-only"])
    #expect(status == 0)
    #expect(output == "factory installed: true\n")
    // This test binary has no typealias: the runtime's own main executor is in place.
    #expect(!LoopExecutorFactory.isInstalled)
  }
}

/// Runs the example with popen (Foundation's Process leaks under LeakSanitizer) and returns its
/// exit status and standard output.
func runExample(arguments: [String] = []) throws -> (Int32, String) {
  let directory = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
  let example = directory.appendingPathComponent("loop-main-example").path
  guard FileManager.default.isExecutableFile(atPath: example) else {
    throw ExampleMissing(path: example)
  }
  let command = ([example] + arguments).map { "'\($0)'" }.joined(separator: " ")
  guard let pipe = popen(command, "r") else { throw ExampleMissing(path: example) }
  var output = ""
  var line = [CChar](repeating: 0, count: 4096)
  while fgets(&line, Int32(line.count), pipe) != nil {
    output += String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
  let status = pclose(pipe)
  // pclose returns a wait status: the exit code is in the second byte.
  return ((status >> 8) & 0xff, output)
}

struct ExampleMissing: Error, CustomStringConvertible {
  let path: String
  var description: String {
    "\(path) is missing or not executable: build it with `swift build` (`swift test` does)"
  }
}
