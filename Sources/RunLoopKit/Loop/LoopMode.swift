extension Loop {
  /// A run loop mode: a name that selects which sources, timers and observers take part in
  /// a run. Mirrors `CFRunLoopMode` (a CFString); `.default` is `kCFRunLoopDefaultMode` and
  /// `.common` is `kCFRunLoopCommonModes`, the pseudo-mode that stands for every mode in the
  /// loop's common-mode set. Unlike CF, a mode is a typed value rather than a bare string.
  public struct Mode: Hashable, Sendable, ExpressibleByStringLiteral, CustomStringConvertible {
    /// The mode's name; modes with equal names are the same mode.
    public let name: String
    /// Whether this is `.default` or `.common`, worked out once when the mode is made: posting
    /// a block asks it on every post, and a String comparison that fails costs a call into
    /// the standard library each time.
    @usableFromInline let predefined: Predefined

    @usableFromInline enum Predefined: UInt8, Sendable {
      case none
      case defaultMode
      case common
    }

    /// The mode called `name`. A loop creates the mode the first time it is used.
    public init(_ name: String) {
      self.name = name
      // The length first, so a mode of any other length is told apart without comparing
      // strings (a failed comparison calls into the standard library).
      switch name.utf8.count {
      case 7 where name == "default": predefined = .defaultMode
      case 6 where name == "common": predefined = .common
      default: predefined = .none
      }
    }
    /// The mode called `name`, written as a string literal.
    public init(stringLiteral name: String) { self.init(name) }

    /// For the predefined modes, whose kind is known without comparing names.
    @inlinable init(name: String, predefined: Predefined) {
      self.name = name
      self.predefined = predefined
    }

    /// Modes are equal when their names are. (Two predefined modes of the same kind have the
    /// same name: their kind was worked out from it.)
    public static func == (lhs: Mode, rhs: Mode) -> Bool {
      lhs.predefined == rhs.predefined && (lhs.predefined != .none || lhs.name == rhs.name)
    }

    /// Hashes the name, as equality compares it.
    public func hash(into hasher: inout Hasher) { hasher.combine(name) }

    /// The mode loops run in unless told otherwise.
    // Computed and inlinable rather than stored: a stored static is reached through a
    // one-time-initialisation check and copied (a retain and release of its name) on every
    // use, which a post from another module paid each time; these fold into constants.
    @inlinable public static var `default`: Mode { Mode(name: "default", predefined: .defaultMode) }
    /// Not a mode you can run: items added to it join every mode in the common-mode set,
    /// now and later (see `Loop.addCommonMode(_:)`).
    @inlinable public static var common: Mode { Mode(name: "common", predefined: .common) }

    /// The mode's name.
    public var description: String { name }
  }
}
