import Foundation
import Glibc
import Testing

/// SEMANTICS 63: `Loop.run` is `noasync`. A compile-time property, so the test compiles a
/// two-line client against the RunLoopKit module this test binary was built with.
extension RunLoopKitTests {
  @Suite("Running a loop from async code") struct Noasync {
    @Test(
      "63. Calling run on a loop from an async context is a compile-time error with a message saying what to use instead"
    )
    func test_63_runIsNoasync() throws {
      // The test binary sits in the build directory that holds the modules it was built with.
      let buildDirectory = URL(fileURLWithPath: CommandLine.arguments[0])
        .deletingLastPathComponent().path
      let client = FileManager.default.temporaryDirectory
        .appendingPathComponent("noasync-\(getpid()).swift")
      try """
      import RunLoopKit
      func waitForWork() async { Loop.current.run(for: .seconds(1)) }
      """.write(to: client, atomically: true, encoding: .utf8)
      defer { try? FileManager.default.removeItem(at: client) }
      // popen, not Foundation's Process, which leaks a weak-reference side table per run
      // (LeakSanitizer reports it in CI).
      let command =
        "swiftc -typecheck -swift-version 6 -I '\(buildDirectory)/Modules' "
        + "-Xcc -fmodule-map-file='\(buildDirectory)/CRunLoopShims.build/module.modulemap' "
        + "'\(client.path)' 2>&1"
      guard let pipe = popen(command, "r") else {
        Issue.record("could not start swiftc")
        return
      }
      var output = ""
      var line = [CChar](repeating: 0, count: 4096)
      while fgets(&line, Int32(line.count), pipe) != nil {
        output += String(
          decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
      }
      let status = pclose(pipe)
      #expect(status != 0, "the async call compiled: \(output)")
      #expect(
        output.contains("error: instance method 'run' is unavailable from asynchronous contexts"))
      #expect(output.contains("ResidentThread.run"), "the message says what to use instead")
    }
  }
}
