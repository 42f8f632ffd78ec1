import Foundation
import Testing

extension RunLoopKitTests {
  /// The article on C libraries quotes the example packages, which CI builds and runs: each
  /// of its Swift snippets must be, line for line, in a file under `Examples/`, so a snippet
  /// cannot drift from the code that runs.
  @Suite("The C libraries article quotes the examples") struct ExampleArticle {
    @Test("Every Swift snippet of C libraries on a loop appears line for line in an example")
    func everySnippetIsInAnExample() throws {
      let article = try PackageFiles.text(
        "Sources/RunLoopKit/RunLoopKit.docc/CLibrariesOnALoop.md")
      let snippets = ReadmeSnippets.swiftSnippets(in: article)
      #expect(snippets.count >= 5, "the article's Swift snippets were not found")
      // Each package's Sources only: a package built here also has a .build folder.
      let packages = try FileManager.default.contentsOfDirectory(
        atPath: PackageFiles.root.appendingPathComponent("Examples").path
      ).map { "Examples/\($0)/Sources" }
        .filter {
          FileManager.default.fileExists(atPath: PackageFiles.root.appendingPathComponent($0).path)
        }
      let examples = try PackageFiles.files(under: packages)
        .filter { $0.pathExtension == "swift" }
        .map { ReadmeSnippets.codeLines(try String(contentsOf: $0, encoding: .utf8)) }
      #expect(examples.count >= 10, "the example packages' sources were not found")
      for snippet in snippets {
        let found = examples.contains { ReadmeSnippets.contains($0, snippet) }
        #expect(found, "no example holds the snippet that starts \"\(snippet.first ?? "")\"")
      }
    }
  }
}
