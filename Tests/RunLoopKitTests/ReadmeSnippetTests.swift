import Foundation
import Testing

extension RunLoopKitTests {
  /// Every Swift snippet in the README is compiled and run by a test: this checks that each
  /// one appears, line for line, in a test file, so a snippet edited in the README without its
  /// test (or a test changed under its snippet) fails here.
  @Suite("README snippets") struct ReadmeSnippets {
    @Test("Every Swift snippet in the README appears line for line in a test")
    func everySnippetIsATest() throws {
      let snippets = Self.swiftSnippets(in: try PackageFiles.text("README.md"))
      #expect(snippets.count >= 5, "the README's Swift snippets were not found")

      for snippet in try Self.notInTests(snippets) {
        Issue.record("no test holds the README snippet that starts \"\(snippet.first ?? "")\"")
      }
    }

    /// The snippets that no Swift file under `Tests/` holds line for line.
    static func notInTests(_ snippets: [[String]]) throws -> [[String]] {
      let tests = try PackageFiles.files(under: ["Tests"]).filter { $0.pathExtension == "swift" }
        .map { codeLines(try String(contentsOf: $0, encoding: .utf8)) }
      return snippets.filter { snippet in !tests.contains { contains($0, snippet) } }
    }

    /// The README's ```swift blocks, each as its code lines.
    static func swiftSnippets(in markdown: String) -> [[String]] {
      var snippets: [[String]] = []
      var current: [Substring]?
      for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
        if current == nil, line.hasPrefix("```swift") {
          current = []
        } else if let lines = current, line.hasPrefix("```") {
          snippets.append(codeLines(lines.joined(separator: "\n")))
          current = nil
        } else {
          current?.append(line)
        }
      }
      return snippets
    }

    /// Lines with their indentation trimmed, blank lines left out: a snippet indented inside
    /// a test function still matches.
    static func codeLines(_ text: String) -> [String] {
      text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        .filter { !$0.isEmpty }
    }

    /// Whether `snippet` is a run of consecutive lines of `file`.
    static func contains(_ file: [String], _ snippet: [String]) -> Bool {
      guard !snippet.isEmpty, snippet.count <= file.count else { return snippet.isEmpty }
      return (0...(file.count - snippet.count)).contains { start in
        file[start..<(start + snippet.count)].elementsEqual(snippet)
      }
    }
  }
}
