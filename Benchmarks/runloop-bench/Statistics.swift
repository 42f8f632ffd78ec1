/// Percentiles of a set of nanosecond samples.
struct Distribution: Codable {
  let count: Int
  let p50: Int64
  let p90: Int64
  let p99: Int64
  let p999: Int64
  let max: Int64
  let mean: Double
  /// Up to 200 (value, fraction at or below) points of the empirical CDF, for the SVG.
  let cdf: [[Double]]

  init(_ samples: [Int64]) {
    let sorted = samples.sorted()
    count = sorted.count
    func at(_ quantile: Double) -> Int64 {
      guard !sorted.isEmpty else { return 0 }
      return sorted[Swift.min(sorted.count - 1, Int(quantile * Double(sorted.count)))]
    }
    p50 = at(0.5)
    p90 = at(0.9)
    p99 = at(0.99)
    p999 = at(0.999)
    max = sorted.last ?? 0
    mean = sorted.isEmpty ? 0 : Double(sorted.reduce(0, +)) / Double(sorted.count)
    let step = Swift.max(1, sorted.count / 200)
    var points: [[Double]] = []
    var index = 0
    while index < sorted.count {
      points.append([Double(sorted[index]), Double(index + 1) / Double(sorted.count)])
      index += step
    }
    if let last = sorted.last { points.append([Double(last), 1]) }
    cdf = points
  }
}

/// The middle value (for an even count, the upper of the two middle ones); every study's
/// "median of rounds".
func medianOf<T: Comparable>(_ values: [T]) -> T {
  let sorted = values.sorted()
  return sorted[sorted.count / 2]
}

/// Formats nanoseconds for a table: 850 ns, 12.3 µs, 4.56 ms.
func formatNanoseconds(_ value: Int64) -> String { formatNanoseconds(Double(value)) }

func formatNanoseconds(_ value: Double) -> String {
  if value < 1_000 { return "\(Int(value.rounded())) ns" }
  if value < 1_000_000 { return fixed(value / 1_000, 1) + " µs" }
  if value < 1_000_000_000 { return fixed(value / 1_000_000, 2) + " ms" }
  return fixed(value / 1_000_000_000, 2) + " s"
}

/// `value` with `digits` decimals, without Foundation's locale-dependent formatting.
func fixed(_ value: Double, _ digits: Int) -> String {
  var scale = 1.0
  for _ in 0..<digits { scale *= 10 }
  let scaled = (value * scale).rounded()
  let whole = Int64(scaled / scale)
  let fraction = Int64(abs(scaled.truncatingRemainder(dividingBy: scale)))
  guard digits > 0 else { return "\(whole)" }
  let padded =
    String(repeating: "0", count: Swift.max(0, digits - "\(fraction)".count)) + "\(fraction)"
  return (scaled < 0 && whole == 0 ? "-" : "") + "\(whole).\(padded)"
}

func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
  let padding = String(repeating: " ", count: Swift.max(0, width - text.count))
  return right ? padding + text : text + padding
}
