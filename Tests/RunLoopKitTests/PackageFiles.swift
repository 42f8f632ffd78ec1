import Foundation
import Testing

/// The package's own files, for tests that check the repository itself (the checklist, the
/// README's snippets, the doc-coverage script).
enum PackageFiles {
  /// The package's root directory: this file is `Tests/RunLoopKitTests/PackageFiles.swift`.
  static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()

  /// The text of the file at `path`, relative to the root.
  static func text(_ path: String) throws -> String {
    try String(contentsOf: root.appendingPathComponent(path), encoding: .utf8)
  }

  /// The regular files at these paths (relative to the root), directories walked; a missing
  /// path is recorded as a test issue.
  static func files(under paths: [String]) throws -> [URL] {
    var result: [URL] = []
    for path in paths {
      let url = root.appendingPathComponent(path)
      var isDirectory: ObjCBool = false
      guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory) else {
        Issue.record("\(path) is missing")
        continue
      }
      guard isDirectory.boolValue else {
        result.append(url)
        continue
      }
      let walker = FileManager.default.enumerator(
        at: url, includingPropertiesForKeys: [.isRegularFileKey])
      while let file = walker?.nextObject() as? URL {
        if try file.resourceValues(forKeys: [.isRegularFileKey]).isRegularFile == true {
          result.append(file)
        }
      }
    }
    return result
  }
}
