/// The bits of JSON the export writes by hand: RunLoopKit does not import Foundation.
enum JSONText {
  /// `text` as a JSON string: quotes, backslashes and control characters escaped.
  static func quoted(_ text: String) -> String {
    var result = "\""
    for scalar in text.unicodeScalars {
      switch scalar {
      case "\"": result += "\\\""
      case "\\": result += "\\\\"
      case "\n": result += "\\n"
      case "\r": result += "\\r"
      case "\t": result += "\\t"
      // The rest of C0 must be escaped; U+2028/9 are valid JSON but break JavaScript readers.
      case _ where scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029:
        let hex = String(scalar.value, radix: 16)
        result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
      default: result.unicodeScalars.append(scalar)
      }
    }
    return result + "\""
  }

  /// Nanoseconds as microseconds with exactly three decimals, such as `1234.005`.
  static func microseconds(_ nanoseconds: Int64) -> String {
    let magnitude = nanoseconds.magnitude
    let fraction = String(magnitude % 1_000)
    return (nanoseconds < 0 ? "-" : "") + String(magnitude / 1_000) + "."
      + String(repeating: "0", count: 3 - fraction.count) + fraction
  }

  static func value(_ value: ChromeTraceEvent.Value) -> String {
    switch value {
    case .string(let text): quoted(text)
    case .integer(let number): String(number)
    case .microseconds(let nanoseconds): microseconds(nanoseconds)
    }
  }
}
