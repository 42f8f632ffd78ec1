import Foundation
import Glibc

/// Type-checks `source` as a Swift 6 client of the RunLoopKit module this test binary was
/// built with, for the lines that are compile-time properties (a call refused from async code,
/// a type that is not Sendable). Returns swiftc's exit status and what it printed.
func typecheckClient(_ source: String) throws -> (status: Int32, output: String) {
  // The test binary sits in the build directory that holds the modules it was built with.
  let buildDirectory = URL(fileURLWithPath: CommandLine.arguments[0])
    .deletingLastPathComponent().path
  let client = FileManager.default.temporaryDirectory
    .appendingPathComponent("client-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).swift")
  try source.write(to: client, atomically: true, encoding: .utf8)
  defer { try? FileManager.default.removeItem(at: client) }
  // popen, not Foundation's Process, which leaks a weak-reference side table per run
  // (LeakSanitizer reports it in CI).
  let command =
    "swiftc -typecheck -swift-version 6 -I '\(buildDirectory)/Modules' "
    + "-Xcc -fmodule-map-file='\(buildDirectory)/CRunLoopShims.build/module.modulemap' "
    + "'\(client.path)' 2>&1"
  guard let pipe = popen(command, "r") else { throw TypecheckError() }
  var output = ""
  var line = [CChar](repeating: 0, count: 4096)
  while fgets(&line, Int32(line.count), pipe) != nil {
    output += String(
      decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
  return (pclose(pipe), output)
}

struct TypecheckError: Error, CustomStringConvertible {
  var description: String { "could not start swiftc" }
}
