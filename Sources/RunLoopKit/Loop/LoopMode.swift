extension Loop {
  /// A run loop mode: a name that selects which sources, timers and observers take part in
  /// a run. Mirrors `CFRunLoopMode` (a CFString); `.default` is `kCFRunLoopDefaultMode` and
  /// `.common` is `kCFRunLoopCommonModes`, the pseudo-mode that stands for every mode in the
  /// loop's common-mode set. Unlike CF, a mode is a typed value rather than a bare string.
  public struct Mode: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The mode's name; modes with equal names are the same mode.
    public let name: String

    /// The mode called `name`. A loop creates the mode the first time it is used.
    public init(_ name: String) { self.name = name }
    /// The mode called `name`, written as a string literal.
    public init(stringLiteral name: String) { self.name = name }

    /// The mode loops run in unless told otherwise.
    public static let `default` = Mode("default")
    /// Not a mode you can run: items added to it join every mode in the common-mode set,
    /// now and later (see `Loop.addCommonMode(_:)`).
    public static let common = Mode("common")

    /// The mode's name.
    public var description: String { name }
  }
}
