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

/// Runs `swift .ci/doc-coverage.swift` with popen (Foundation's Process leaks under LSan).
private func runChecker(_ directory: URL, module: String) throws -> (Int32, String) {
  let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()
  let script = root.appendingPathComponent(".ci/doc-coverage.swift").path
  let command = "swift '\(script)' '\(directory.path)' \(module) 2>&1"
  guard let pipe = popen(command, "r") else { throw POSIXError(.EIO) }
  var output = ""
  var line = [CChar](repeating: 0, count: 4096)
  while fgets(&line, Int32(line.count), pipe) != nil {
    output += String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
  return ((pclose(pipe) >> 8) & 0xff, output)
}
