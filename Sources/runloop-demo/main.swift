// runloop-demo: guided scenarios that show a run loop at work. Each prints the trace of what
// its loops did and a paragraph on why; `--svg FILE` also draws the trace as swim lanes.
import Foundation
import RunLoopDemos

func usage() -> String {
  var lines = [
    "usage: runloop-demo <scenario> [--svg FILE]",
    "       runloop-demo all           (every scenario, one after another)",
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
var svgPath: String?
if let flag = arguments.firstIndex(of: "--svg") {
  guard flag + 1 < arguments.count else { fail("--svg needs a file name\n\n" + usage(), status: 2) }
  svgPath = arguments[flag + 1]
  arguments.removeSubrange(flag...(flag + 1))
}
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

for scenario in scenarios {
  do {
    let report = try scenario.run()
    print(report.text())
    if let svgPath {
      try report.svg().write(toFile: svgPath, atomically: true, encoding: .utf8)
      print("The trace as swim lanes: \(svgPath)")
    }
  } catch {
    fail("runloop-demo \(scenario.name) failed: \(error)", status: 1)
  }
}
