import Foundation

/// A one-line description of where the numbers came from.
enum Machine {
  static func describe() -> String {
    let cpu =
      (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8))?
      .split(separator: "\n").first { $0.hasPrefix("model name") }?
      .split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "unknown CPU"
    let kernel =
      (try? String(contentsOfFile: "/proc/sys/kernel/osrelease", encoding: .utf8))?
      .trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown kernel"
    return "\(ProcessInfo.processInfo.activeProcessorCount) cores, \(cpu), Linux \(kernel)"
  }
}
