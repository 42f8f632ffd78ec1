import Foundation

/// Draws the scaling study's manual-source curve: events performed per second against the
/// number of sources on the loop, ours and the C floor's, both axes on a log scale, so a cost
/// that follows the sources held (rather than the ones signalled) shows as a falling line
/// next to a flat one. A second file next to the wake-latency chart (`--svg`).
enum ScalingChart {
  /// `r.svg` → `r-scaling.svg` (any other name gets `-scaling.svg` appended).
  static func path(besides path: String) -> String {
    (path.hasSuffix(".svg") ? String(path.dropLast(4)) : path) + "-scaling.svg"
  }

  static func svg(_ scaling: ScalingResult, title: String) -> String {
    let rows = scaling.manualSources
    let width = 900.0
    let height = 540.0
    let left = 90.0
    let right = 230.0
    let top = 50.0
    let bottom = 60.0
    let plotWidth = width - left - right
    let plotHeight = height - top - bottom

    let counts = rows.map { Double($0.sources) }
    let xLow = log10(counts.min() ?? 1_000) - 0.15
    let xHigh = log10(counts.max() ?? 1_000_000) + 0.15
    let rates = rows.flatMap { $0.eventsPerSecond.ours + $0.eventsPerSecond.c }.filter { $0 > 0 }
    let low = pow(10, floor(log10(rates.min() ?? 1)))
    let high = pow(10, ceil(log10(rates.max() ?? 1e7)))
    func x(_ count: Double) -> Double {
      left + plotWidth * (log10(count) - xLow) / max(xHigh - xLow, 0.1)
    }
    func y(_ rate: Double) -> Double {
      // A window with no event at all is drawn on the bottom edge.
      let clamped = min(max(rate, low), high)
      return top + plotHeight * (1 - (log10(clamped) - log10(low)) / max(log10(high / low), 1))
    }

    var out = """
      <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" \
      viewBox="0 0 \(Int(width)) \(Int(height))" font-family="sans-serif" font-size="12">
      <rect width="100%" height="100%" fill="white"/>
      <text x="\(left)" y="28" font-size="16" font-weight="bold">\(LatencyChart.escape(title))</text>

      """
    var decade = low
    while decade <= high * 1.0001 {
      let position = fixed(y(decade), 1)
      out +=
        "<line x1=\"\(left)\" y1=\"\(position)\" x2=\"\(left + plotWidth)\" y2=\"\(position)\" stroke=\"#ddd\"/>\n"
      out +=
        "<text x=\"\(left - 8)\" y=\"\(fixed(y(decade) + 4, 1))\" text-anchor=\"end\">\(decadeLabel(decade))</text>\n"
      decade *= 10
    }
    for count in counts {
      let position = fixed(x(count), 1)
      out +=
        "<line x1=\"\(position)\" y1=\"\(top)\" x2=\"\(position)\" y2=\"\(top + plotHeight)\" stroke=\"#ddd\"/>\n"
      out +=
        "<text x=\"\(position)\" y=\"\(top + plotHeight + 18)\" text-anchor=\"middle\">\(grouped(Int(count)))</text>\n"
    }
    out +=
      "<rect x=\"\(left)\" y=\"\(top)\" width=\"\(plotWidth)\" height=\"\(plotHeight)\" fill=\"none\" stroke=\"#333\"/>\n"
    out +=
      "<text x=\"\(left + plotWidth / 2)\" y=\"\(height - 15)\" text-anchor=\"middle\">manual sources on the loop, one signalled at a time at random (log scale)</text>\n"
    out +=
      "<text transform=\"translate(18 \(top + plotHeight / 2)) rotate(-90)\" text-anchor=\"middle\">events performed per second (log scale)</text>\n"

    let sides:
      [(name: String, color: String, dash: String, rounds: [[Double]], medians: [Double])] =
        [
          (
            "RunLoopKit ManualSource", LatencyChart.palette[0], "",
            rows.map(\.eventsPerSecond.ours), rows.map(\.eventsPerSecond.oursMedian)
          ),
          (
            "C floor: ready list + eventfd", LatencyChart.palette[1], " stroke-dasharray=\"6 4\"",
            rows.map(\.eventsPerSecond.c), rows.map(\.eventsPerSecond.cMedian)
          ),
        ]
    for (index, side) in sides.enumerated() {
      // Every round as a faint dot, the medians as the line.
      for (count, rounds) in zip(counts, side.rounds) {
        for rate in rounds {
          out +=
            "<circle cx=\"\(fixed(x(count), 1))\" cy=\"\(fixed(y(rate), 1))\" r=\"3\" fill=\"\(side.color)\" fill-opacity=\"0.35\"/>\n"
        }
      }
      let points = zip(counts, side.medians).map { "\(fixed(x($0), 1)),\(fixed(y($1), 1))" }
        .joined(separator: " ")
      out +=
        "<polyline fill=\"none\" stroke=\"\(side.color)\" stroke-width=\"2\"\(side.dash) points=\"\(points)\"/>\n"
      out += LatencyChart.legendEntry(
        x: left + plotWidth + 20, y: top + 10 + Double(index) * 20, color: side.color,
        dash: side.dash, name: side.name)
    }
    out +=
      "<text x=\"\(left + plotWidth + 20)\" y=\"\(top + 60)\" fill=\"#555\">line: median of \(scaling.rounds) rounds</text>\n"
    out +=
      "<text x=\"\(left + plotWidth + 20)\" y=\"\(top + 76)\" fill=\"#555\">dots: each round</text>\n"
    out += "</svg>\n"
    return out
  }

  /// A power of ten as a rate: 1 /s, 100 /s, 10 k/s, 1 M/s.
  static func decadeLabel(_ value: Double) -> String {
    if value >= 1e6 { return "\(Int((value / 1e6).rounded())) M/s" }
    if value >= 1e3 { return "\(Int((value / 1e3).rounded())) k/s" }
    return "\(Int(value.rounded())) /s"
  }
}
