import Foundation
import Testing

extension RunLoopKitTests {
  /// The behaviour checklist is the DocC article `BehaviourChecklist.md`, and the tests cite its
  /// numbers. These tests read the package's own files, so a line without a test, a test citing
  /// a line that does not exist, or a reference to a document outside the repository fails here.
  @Suite("Behaviour checklist") struct Checklist {
    @Test("87. The checklist is in the repository, numbered from 1 without a gap")
    func test_87_checklistIsInTheRepository() throws {
      let lines = try checklistLines()
      #expect(!lines.isEmpty)
      #expect(lines == Array(1...(lines.last ?? 0)), "numbers out of order or missing: \(lines)")
    }

    @Test("87. Every checklist line is named by a test, and every cited line exists")
    func test_87_everyLineHasATestNamingIt() throws {
      let lines = Set(try checklistLines())
      let cited = try citedLines()
      let untested = lines.subtracting(cited).sorted()
      let unknown = cited.subtracting(lines).sorted()
      #expect(untested.isEmpty, "checklist lines no test names: \(untested)")
      #expect(unknown.isEmpty, "tests cite lines the checklist does not have: \(unknown)")
    }

    @Test("87. Nothing in the README, the sources or the tests points outside the repository")
    func test_87_noReferenceToOutsideDocuments() throws {
      // Spelled in pieces so this file does not match itself.
      let outside = ["shared" + "/", "DESIGN" + ".md"]
      var offenders: [String] = []
      for file in try PackageFiles.files(under: ["README.md", "Sources", "Tests"]) {
        let text = try String(contentsOf: file, encoding: .utf8)
        for needle in outside where text.contains(needle) {
          offenders.append("\(file.lastPathComponent) mentions \(needle)")
        }
      }
      #expect(offenders.isEmpty, "\(offenders)")
    }

    /// The numbers of the checklist's lines, in the order they appear.
    private func checklistLines() throws -> [Int] {
      let text = try PackageFiles.text("Sources/RunLoopKit/RunLoopKit.docc/BehaviourChecklist.md")
      return text.split(separator: "\n").compactMap { line in
        guard let dot = line.firstIndex(of: "."), dot > line.startIndex else { return nil }
        return Int(line[..<dot])
      }
    }

    /// Every line number a test cites: `func test_17_…` (or `test_51b_…`), or a display name
    /// that starts with `17.`.
    private func citedLines() throws -> Set<Int> {
      let functionName = try Regex(#"func test_0*([0-9]+)[a-z]?_"#)
      let displayName = try Regex(#"@Test\(\s*"([0-9]+)\."#)
      var cited: Set<Int> = []
      for file in try PackageFiles.files(under: ["Tests"]) where file.pathExtension == "swift" {
        let text = try String(contentsOf: file, encoding: .utf8)
        for regex in [functionName, displayName] {
          for match in text.matches(of: regex) {
            if let number = match.output[1].substring.flatMap({ Int($0) }) { cited.insert(number) }
          }
        }
      }
      return cited
    }
  }
}
