extension Loop {
  /// The points in an iteration an observer can be told about. Mirrors `CFRunLoopActivity`,
  /// with the same raw values so masks can be compared with CF's one for one.
  public struct Activity: OptionSet, Hashable, Sendable, CustomStringConvertible {
    /// The activity bits, the same as `CFRunLoopActivity`'s.
    public let rawValue: UInt

    /// Creates a mask from raw bits, such as a `CFRunLoopActivity` value.
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// A run is starting, before its first pass (`kCFRunLoopEntry`).
    public static let entry = Activity(rawValue: 1 << 0)
    /// A pass is starting; due timers are fired later in it (`kCFRunLoopBeforeTimers`).
    public static let beforeTimers = Activity(rawValue: 1 << 1)
    /// The pass is about to run blocks and signalled manual sources (`kCFRunLoopBeforeSources`).
    public static let beforeSources = Activity(rawValue: 1 << 2)
    /// The loop is about to sleep (`kCFRunLoopBeforeWaiting`); not told when the pass only polls.
    public static let beforeWaiting = Activity(rawValue: 1 << 5)
    /// The loop woke from a sleep, before handling what woke it (`kCFRunLoopAfterWaiting`).
    public static let afterWaiting = Activity(rawValue: 1 << 6)
    /// A run is returning (`kCFRunLoopExit`).
    public static let exit = Activity(rawValue: 1 << 7)
    /// Every activity above, for `kCFRunLoopAllActivities` (which sets more bits than these six).
    public static let all: Activity = [
      .entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .exit,
    ]

    private static let names: [(Activity, String)] = [
      (.entry, "entry"), (.beforeTimers, "beforeTimers"), (.beforeSources, "beforeSources"),
      (.beforeWaiting, "beforeWaiting"), (.afterWaiting, "afterWaiting"), (.exit, "exit"),
    ]

    /// The activity's name, or a bracketed list for a mask of several, such as `[entry, exit]`.
    public var description: String {
      let parts = Activity.names.filter { contains($0.0) }.map(\.1)
      return parts.count == 1 ? parts[0] : "[" + parts.joined(separator: ", ") + "]"
    }
  }
}
