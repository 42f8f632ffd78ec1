// runloop-demo: guided scenarios that show a run loop at work. Each prints the trace of what
// its loops did and a paragraph on why; `--svg FILE` also draws the trace as swim lanes, and
// `--trace FILE` writes it as Chrome Trace Event JSON for Perfetto.
import Foundation
import RunLoopDemos

func usage() -> String {
  var lines = [
    "usage: runloop-demo <scenario> [--svg FILE] [--trace FILE]",
    "       runloop-demo all           (every scenario, one after another)",
    "",
    "  --svg FILE     also draw the scenario's trace as swim lanes (SVG)",
    "  --trace FILE   also write it as Chrome Trace Event JSON: open it in ui.perfetto.dev",
    "                 or chrome://tracing (a track per thread)",
    "",
    "scenarios:",
  ]
  let width = DemoScenario.all.map(\.name.count).max() ?? 0
  for scenario in DemoScenario.all {
    let padding = String(repeating: " ", count: width - scenario.name.count)
    lines.append("  \(scenario.name)\(padding)  \(scenario.summary)")
  }
  return lines.joined(separator: "\n")
}

func fail(_ message: String, status: Int32) -> Never {
  FileHandle.standardError.write(Data((message + "\n").utf8))
  exit(status)
}

var arguments = Array(CommandLine.arguments.dropFirst())

/// Takes `flag FILE` out of `arguments`, if given, and returns the file.
func takePath(_ flag: String, from arguments: inout [String]) -> String? {
  guard let index = arguments.firstIndex(of: flag) else { return nil }
  guard index + 1 < arguments.count else {
    fail("\(flag) needs a file name\n\n" + usage(), status: 2)
  }
  defer { arguments.removeSubrange(index...(index + 1)) }
  return arguments[index + 1]
}
let svgPath = takePath("--svg", from: &arguments)
let tracePath = takePath("--trace", from: &arguments)
guard let name = arguments.first, arguments.count == 1 else {
  print(usage())
  exit(arguments.isEmpty ? 0 : 2)
}

let scenarios: [DemoScenario]
if name == "all" {
  scenarios = DemoScenario.all
} else if let scenario = DemoScenario.named(name) {
  scenarios = [scenario]
} else {
  fail("unknown scenario \"\(name)\"\n\n" + usage(), status: 2)
}
if svgPath != nil && scenarios.count != 1 { fail("--svg needs a single scenario", status: 2) }
if tracePath != nil && scenarios.count != 1 { fail("--trace needs a single scenario", status: 2) }

for scenario in scenarios {
  do {
    let report = try scenario.run()
    print(report.text())
    if let svgPath {
      try report.svg().write(toFile: svgPath, atomically: true, encoding: .utf8)
      print("The trace as swim lanes: \(svgPath)")
    }
    if let tracePath {
      try report.chromeTraceJSON().write(toFile: tracePath, atomically: true, encoding: .utf8)
      print("The trace for Perfetto (ui.perfetto.dev): \(tracePath)")
    }
  } catch {
    fail("runloop-demo \(scenario.name) failed: \(error)", status: 1)
  }
}
