import Foundation

/// Draws the wake-latency distributions as CDFs on a log-scale time axis: one line per case,
/// so the gap between busy-waiting and sleeping threads is visible at a glance.
enum LatencyChart {
  static let palette = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf", "#393b79", "#637939",
  ]

  /// One line per charted case and pinned placement: solid for the same CPU, dashed for
  /// different CPUs, one colour per case.
  struct Series {
    let name: String
    let cdf: [[Double]]
    let colorIndex: Int
    let dashed: Bool
  }

  /// The cases worth a line: the floors and the peers a reader compares `Loop.perform` with.
  static let charted = [
    WakeLatencyStudy.floorName, "C posting floor (mutex queue + eventfd)", "C pthread condvar",
    "DispatchQueue.async (serial)", "CFRunLoopPerformBlock + WakeUp", "Loop.perform",
  ]

  static func series(from wake: [WakeResult]) -> [Series] {
    var series: [Series] = []
    for (colorIndex, name) in charted.enumerated() {
      guard let result = wake.first(where: { $0.name == name }) else { continue }
      for placement in [Placement.sameCPU, .crossCPU] {
        guard let figures = result.figures(in: placement) else { continue }
        series.append(
          Series(
            name: "\(name), \(placement.rawValue)", cdf: figures.pooled.cdf,
            colorIndex: colorIndex, dashed: placement == .crossCPU))
      }
    }
    return series
  }

  static func svg(_ series: [Series], title: String) -> String {
    let width = 1040.0
    let height = 560.0
    let left = 70.0
    let right = 400.0
    let top = 50.0
    let bottom = 60.0
    let plotWidth = width - left - right
    let plotHeight = height - top - bottom
    let values = series.flatMap { $0.cdf.map { $0[0] } }.filter { $0 > 0 }
    let low = pow(10, floor(log10(values.min() ?? 100)))
    let high = pow(10, ceil(log10(values.max() ?? 1e6)))
    func x(_ value: Double) -> Double {
      left + plotWidth * (log10(max(value, low)) - log10(low)) / (log10(high) - log10(low))
    }
    func y(_ fraction: Double) -> Double { top + plotHeight * (1 - fraction) }

    var out = """
      <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" \
      viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="12">
      <rect width="100%" height="100%" fill="white"/>
      <text x="\(left)" y="28" font-size="16" font-weight="bold">\(escape(title))</text>

      """
    var decade = low
    while decade <= high * 1.0001 {
      let position = x(decade)
      out +=
        "<line x1=\"\(position)\" y1=\"\(top)\" x2=\"\(position)\" y2=\"\(top + plotHeight)\" stroke=\"#ddd\"/>\n"
      out +=
        "<text x=\"\(position)\" y=\"\(top + plotHeight + 18)\" text-anchor=\"middle\">\(escape(formatNanoseconds(decade)))</text>\n"
      decade *= 10
    }
    for fraction in stride(from: 0.0, through: 1.0, by: 0.25) {
      out +=
        "<line x1=\"\(left)\" y1=\"\(y(fraction))\" x2=\"\(left + plotWidth)\" y2=\"\(y(fraction))\" stroke=\"#ddd\"/>\n"
      out +=
        "<text x=\"\(left - 8)\" y=\"\(y(fraction) + 4)\" text-anchor=\"end\">\(Int(fraction * 100))%</text>\n"
    }
    out +=
      "<rect x=\"\(left)\" y=\"\(top)\" width=\"\(plotWidth)\" height=\"\(plotHeight)\" fill=\"none\" stroke=\"#333\"/>\n"
    out +=
      "<text x=\"\(left + plotWidth / 2)\" y=\"\(height - 15)\" text-anchor=\"middle\">one-way wake latency (log scale)</text>\n"
    out +=
      "<text transform=\"translate(18 \(top + plotHeight / 2)) rotate(-90)\" text-anchor=\"middle\">samples at or below</text>\n"
    for (index, line) in series.enumerated() {
      let color = palette[line.colorIndex % palette.count]
      let dash = line.dashed ? " stroke-dasharray=\"6 4\"" : ""
      let points = line.cdf.map { "\(fixed(x($0[0]), 1)),\(fixed(y($0[1]), 1))" }.joined(
        separator: " ")
      out +=
        "<polyline fill=\"none\" stroke=\"\(color)\" stroke-width=\"2\"\(dash) points=\"\(points)\"/>\n"
      out += legendEntry(
        x: left + plotWidth + 20, y: top + 10 + Double(index) * 20, color: color, dash: dash,
        name: line.name)
    }
    out += "</svg>\n"
    return out
  }

  /// One line of a chart's legend: a short stroke in the series' colour and dash, its name.
  static func legendEntry(x: Double, y: Double, color: String, dash: String, name: String)
    -> String
  {
    "<line x1=\"\(x)\" y1=\"\(y)\" x2=\"\(x + 24)\" y2=\"\(y)\" stroke=\"\(color)\" stroke-width=\"3\"\(dash)/>\n"
      + "<text x=\"\(x + 30)\" y=\"\(y + 4)\">\(escape(name))</text>\n"
  }

  static func escape(_ text: String) -> String {
    text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
      .replacingOccurrences(of: ">", with: "&gt;")
  }
}
