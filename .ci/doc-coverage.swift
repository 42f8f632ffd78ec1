// Fails when a public symbol of the given modules has no doc comment.
//
// Usage: swift .ci/doc-coverage.swift <symbol-graph-dir> <Module>...
//
// Reads the symbol graphs the compiler wrote (`-emit-symbol-graph`, see .ci/docc): for each
// module, <Module>.symbols.json and its extension graphs <Module>@<Other>.symbols.json. A
// symbol counts when it is public or open and declared in this package's sources (the graph
// gives its file); synthesized members and declarations inherited from other modules have no
// such location and are skipped. A doc comment counts only if one of its lines has text, so
// an empty `///` cannot fool the check. Prints every undocumented symbol with its file and
// line, and exits 1 if there is any.
import Foundation

struct Finding { let name: String; let file: String; let line: Int }

func lines(_ comment: [String: Any]?) -> [String] {
  (comment?["lines"] as? [[String: Any]] ?? []).compactMap { $0["text"] as? String }
}

let arguments = CommandLine.arguments.dropFirst()
guard arguments.count >= 2 else {
  FileHandle.standardError.write(Data("usage: doc-coverage <symbol-graph-dir> <Module>...\n".utf8))
  exit(2)
}
let directory = URL(fileURLWithPath: arguments.first!)
let modules = Array(arguments.dropFirst())
let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []

var checked = 0
var missing: [Finding] = []
var seen = Set<String>()
for module in modules {
  let own = files.filter { $0 == "\(module).symbols.json" || $0.hasPrefix("\(module)@") }
  guard own.contains("\(module).symbols.json") else {
    FileHandle.standardError.write(Data("doc-coverage: no \(module).symbols.json in \(directory.path)\n".utf8))
    exit(2)
  }
  for file in own.sorted() {
    let data = try Data(contentsOf: directory.appendingPathComponent(file))
    let graph = try JSONSerialization.jsonObject(with: data) as! [String: Any]
    for symbol in graph["symbols"] as? [[String: Any]] ?? [] {
      let access = symbol["accessLevel"] as? String ?? ""
      guard access == "public" || access == "open" else { continue }
      guard let location = symbol["location"] as? [String: Any],
        let uri = location["uri"] as? String, uri.contains("/Sources/")
      else { continue }
      let identifier = (symbol["identifier"] as? [String: Any])?["precise"] as? String ?? ""
      guard seen.insert(identifier).inserted else { continue }
      checked += 1
      let documented = lines(symbol["docComment"] as? [String: Any]).contains {
        !$0.trimmingCharacters(in: .whitespaces).isEmpty
      }
      if documented { continue }
      let names = symbol["names"] as? [String: Any]
      let path = (symbol["pathComponents"] as? [String])?.joined(separator: ".")
      let title = path ?? names?["title"] as? String ?? identifier
      let position = location["position"] as? [String: Any]
      missing.append(
        Finding(
          name: "\(module): \(title)", file: String(uri.split(separator: "/Sources/").last ?? ""),
          line: (position?["line"] as? Int ?? 0) + 1))
    }
  }
}

for finding in missing.sorted(by: { ($0.file, $0.line) < ($1.file, $1.line) }) {
  print("undocumented: \(finding.name)  (Sources/\(finding.file):\(finding.line))")
}
print("doc-coverage: \(checked - missing.count) of \(checked) public symbols documented")
exit(missing.isEmpty ? 0 : 1)
