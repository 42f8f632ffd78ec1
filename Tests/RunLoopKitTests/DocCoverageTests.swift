import Foundation
import Glibc
import Testing

extension RunLoopKitTests {
  @Suite("Documentation coverage") struct DocCoverage {
    /// CI runs `.ci/doc-coverage.swift` on the symbol graphs of both library products (in
    /// `.ci/docc`); this test shows that the checker fails for the cases it must catch,
    /// including a comment with no text, and passes a fully documented module.
    @Test(
      "72. The doc-coverage check fails for a public symbol without a doc comment, even an empty one"
    )
    func test_72_checkerCatchesUndocumentedSymbols() throws {
      let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("doc-coverage-\(getpid())")
      try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: directory) }

      let symbols: [[String: Any]] = [
        symbol("documented", comment: ["Does one thing."]),
        symbol("undocumented", comment: nil),
        symbol("emptyComment", comment: [""]),
        symbol("blankComment", comment: ["   ", ""]),
        symbol("internalHelper", comment: nil, access: "internal"),
        symbol("synthesized", comment: nil, located: false),
      ]
      try write(["symbols": symbols], to: directory.appendingPathComponent("Fixture.symbols.json"))
      let (status, output) = try runChecker(directory, module: "Fixture")
      #expect(status == 1)
      let flagged = output.split(separator: "\n").filter { $0.hasPrefix("undocumented:") }
        .map { String($0.split(separator: " ")[2]) }
      #expect(flagged == ["undocumented", "emptyComment", "blankComment"])
      #expect(output.contains("doc-coverage: 1 of 4 public symbols documented"))

      try write(
        ["symbols": [symbol("documented", comment: ["Does one thing."])]],
        to: directory.appendingPathComponent("Fixture.symbols.json"))
      let (passing, _) = try runChecker(directory, module: "Fixture")
      #expect(passing == 0)
    }

    /// The library itself, not only the checker: the symbol graphs are extracted from the
    /// modules this test run was built from (`swift symbolgraph-extract` reads their
    /// .swiftmodule, .swiftdoc and .swiftsourceinfo; under a second), then checked as CI checks
    /// the compiler's graphs in `.ci/docc`.
    @Test("72. Every public symbol of RunLoopKit and RunLoopKitExecutors has a doc comment")
    func test_72_librarySymbolsAreDocumented() throws {
      let directory = FileManager.default.temporaryDirectory
        .appendingPathComponent("doc-coverage-library-\(getpid())")
      try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
      defer { try? FileManager.default.removeItem(at: directory) }
      // The test binary sits in the build directory, next to the modules it was linked from.
      let build = URL(
        fileURLWithPath: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
      ).deletingLastPathComponent()
      let modules = build.appendingPathComponent("Modules")
      #expect(
        FileManager.default.fileExists(
          atPath: modules.appendingPathComponent("RunLoopKit.swiftmodule").path))
      #if arch(x86_64)
        let target = "x86_64-unknown-linux-gnu"
      #else
        let target = "aarch64-unknown-linux-gnu"
      #endif
      for module in ["RunLoopKit", "RunLoopKitExecutors"] {
        let (status, output) = try run(
          "swift symbolgraph-extract -module-name \(module) -target \(target)"
            + " -I '\(modules.path)' -I '\(build.path)' -minimum-access-level public"
            + " -output-dir '\(directory.path)'")
        #expect(status == 0, "symbolgraph-extract \(module): \(output)")
      }
      let (status, output) = try runChecker(
        directory, module: "RunLoopKit RunLoopKitExecutors")
      #expect(status == 0, "\(output)")
      // Not a vacuous pass: both modules' graphs were read and their symbols counted.
      let counted = output.split(separator: "\n").first { $0.hasPrefix("doc-coverage: ") }
      let numbers = counted?.split(separator: " ").compactMap { Int($0) } ?? []
      #expect(numbers.count == 2 && numbers[0] == numbers[1] && numbers[0] > 200, "\(output)")
    }
  }
}

private func symbol(
  _ name: String, comment: [String]?, access: String = "public", located: Bool = true
) -> [String: Any] {
  var symbol: [String: Any] = [
    "identifier": ["precise": "s:7Fixture\(name)", "interfaceLanguage": "swift"],
    "names": ["title": name],
    "pathComponents": [name],
    "accessLevel": access,
  ]
  if let comment { symbol["docComment"] = ["lines": comment.map { ["text": $0] }] }
  if located {
    symbol["location"] = [
      "uri": "file:///package/Sources/Fixture/File.swift",
      "position": ["line": 3, "character": 2],
    ]
  }
  return symbol
}

private func write(_ object: [String: Any], to url: URL) throws {
  try JSONSerialization.data(withJSONObject: object).write(to: url)
}

/// Runs `swift .ci/doc-coverage.swift` on `directory` for `module` (one or more names).
private func runChecker(_ directory: URL, module: String) throws -> (Int32, String) {
  let script = PackageFiles.root.appendingPathComponent(".ci/doc-coverage.swift").path
  return try run("swift '\(script)' '\(directory.path)' \(module)")
}

/// Runs a shell command with popen (Foundation's Process leaks under LSan); returns its exit
/// status and its output, standard error included.
private func run(_ command: String) throws -> (Int32, String) {
  guard let pipe = popen("\(command) 2>&1", "r") else { throw POSIXError(.EIO) }
  var output = ""
  var line = [CChar](repeating: 0, count: 4096)
  while fgets(&line, Int32(line.count), pipe) != nil {
    output += String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
  return ((pclose(pipe) >> 8) & 0xff, output)
}
