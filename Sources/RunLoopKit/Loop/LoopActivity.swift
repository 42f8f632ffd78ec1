extension Loop {
  /// The points in an iteration an observer can be told about. Mirrors `CFRunLoopActivity`,
  /// with the same raw values so masks can be compared with CF's one for one.
  public struct Activity: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt

    public init(rawValue: UInt) { self.rawValue = rawValue }

    public static let entry = Activity(rawValue: 1 << 0)
    public static let beforeTimers = Activity(rawValue: 1 << 1)
    public static let beforeSources = Activity(rawValue: 1 << 2)
    public static let beforeWaiting = Activity(rawValue: 1 << 5)
    public static let afterWaiting = Activity(rawValue: 1 << 6)
    public static let exit = Activity(rawValue: 1 << 7)
    public static let all: Activity = [
      .entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .exit,
    ]

    private static let names: [(Activity, String)] = [
      (.entry, "entry"), (.beforeTimers, "beforeTimers"), (.beforeSources, "beforeSources"),
      (.beforeWaiting, "beforeWaiting"), (.afterWaiting, "afterWaiting"), (.exit, "exit"),
    ]

    public var description: String {
      let parts = Activity.names.filter { contains($0.0) }.map(\.1)
      return parts.count == 1 ? parts[0] : "[" + parts.joined(separator: ", ") + "]"
    }
  }
}
