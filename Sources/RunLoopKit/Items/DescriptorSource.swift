import CRunLoopShims

/// Fires when a file descriptor becomes readable or writable, or reports an error or a
/// hang-up. Mirrors a version-1 `CFRunLoopSource` (CF's are Mach ports; here any pollable fd:
/// pipes, sockets, eventfds, timerfds, signalfds, inotify…), and is what wakes a sleeping loop.
///
/// - `error` and `hangUp` are always reported, whatever the interest.
/// - An error or a full hang-up (EPOLLERR, EPOLLHUP) is final: after the handler has been told,
///   the source stops polling its descriptor (so a dead fd cannot make the loop spin) until its
///   interest is set again. A peer that only shut down its sending side (EPOLLRDHUP) is also
///   reported as `hangUp`, but the socket may still hold data and still be writable, so that
///   one is not final: read to the end, then remove the source.
/// - The source does not own the descriptor: close it after removing or invalidating the
///   source. A source whose fd was closed and whose number was reused never receives the new
///   file's events (registrations are keyed by a token, not by the fd number).
/// - The descriptor is polled level-triggered: a readable fd the handler does not drain fires
///   again on the next pass.
public final class DescriptorSource: @unchecked Sendable {  // binding.lock / loop lock
  /// What a descriptor can report.
  public struct Events: OptionSet, Hashable, Sendable, CustomStringConvertible {
    /// The event bits, one per option below.
    public let rawValue: UInt8
    /// Creates a set from its raw bits.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The descriptor can be read without blocking (EPOLLIN).
    public static let readable = Events(rawValue: 1 << 0)
    /// The descriptor can be written without blocking (EPOLLOUT).
    public static let writable = Events(rawValue: 1 << 1)
    /// The descriptor reported an error (EPOLLERR). Always reported; final until the interest is
    /// set again.
    public static let error = Events(rawValue: 1 << 2)
    /// The peer hung up (EPOLLHUP) or shut down its sending side (EPOLLRDHUP). Always reported;
    /// only a full hang-up is final.
    public static let hangUp = Events(rawValue: 1 << 3)
    /// The descriptor no longer refers to the file the source was added with: it was closed
    /// (while a `dup` or a child process kept the file open, so the kernel still reported
    /// it) or closed and its number reused for another file. Reported once, together with
    /// `error`, when the loop finds it before any call since the source was added or its
    /// interest set; found only after a plain call (which may already have come after the
    /// close), the source is parked without this report. Either way it then stops polling.
    /// Invalidate it: nothing it reads is its own.
    public static let invalidDescriptor = Events(rawValue: 1 << 4)

    /// The names of the events in the set, such as `[readable, hangUp]`.
    public var description: String {
      let names: [(Events, String)] = [
        (.readable, "readable"), (.writable, "writable"), (.error, "error"), (.hangUp, "hangUp"),
        (.invalidDescriptor, "invalidDescriptor"),
      ]
      return "[" + names.filter { contains($0.0) }.map(\.1).joined(separator: ", ") + "]"
    }
  }

  /// The descriptor the source watches (what `CFFileDescriptorGetNativeDescriptor` returns for a
  /// `CFFileDescriptor`). The source does not own it.
  public let fileDescriptor: Int32
  /// A name for traces and `debugDescription`; the loop does not use it otherwise.
  public let label: String?
  /// Lower orders are handled first when several descriptors are ready in one pass
  /// (`CFRunLoopSourceGetOrder`).
  public let order: Int
  typealias Handler = (DescriptorSource, Events) -> Void
  /// Guarded by `binding.lock`; nil once the source is invalid, so what it captured is freed.
  @exclusivity(unchecked) private var storedHandler: Handler?
  let onTeardown: (@Sendable (String) -> Void)?
  /// The main loop's source on libdispatch's main-queue eventfd (see `Loop+MainQueue.swift`).
  let isMainQueue: Bool
  /// The descriptor is one the library made and closes only after unregistering it (a port's
  /// or a signal source's eventfd, a child's pidfd, the main queue's): it cannot go stale, so
  /// deliveries skip the stale check and adding it keeps no spare epoll set.
  let ownsDescriptor: Bool
  /// Told when the source joins its first mode and leaves its last (signal sources watch
  /// their signal only while they are in a mode).
  let membership: (any DescriptorMembership)?
  /// A port's queue: what the loop's final drain delivers (`runAcceptedWorkBeforeExit`).
  let messages: (any AcceptedMessages)?
  /// Run by the loop before it next waits, once the handler has been called (a port drains
  /// its eventfd here, off the path from wake-up to message: see `PortMailbox`).
  let beforeNextWait: (@Sendable () -> Void)?
  let binding: ItemBinding
  /// Guarded by `binding.lock`.
  @exclusivity(unchecked) private var storedInterest: Events

  /// One entry per mode this source is registered in. Guarded by the owner loop's lock (so
  /// the runtime's exclusivity check, on the path of every delivery, is left out).
  @exclusivity(unchecked) var registrations: [DescriptorRegistration] = []
  /// The pin of the file the source was first added with, in its loop's
  /// `DescriptorWitnesses` (0: none, for a source never added or whose descriptor the library
  /// owns). Guarded by the owner loop's lock.
  @exclusivity(unchecked) var witness: UInt64 = 0

  /// - Parameters:
  ///   - fileDescriptor: any pollable descriptor; regular files are refused when added.
  ///   - label: a name for traces and `debugDescription`.
  ///   - interest: `.readable`, `.writable` or both (error and hang-up are always reported).
  ///   - order: lower orders are handled first when several descriptors are ready at once.
  ///   - handler: called on the loop's thread with what the descriptor reported. A `sending`
  ///     closure: it may capture a non-Sendable value (a connection's state) that the caller
  ///     hands over and no longer uses.
  public convenience init(
    fileDescriptor: Int32,
    label: String? = nil,
    interest: Events = .readable,
    order: Int = 0,
    handler: sending @escaping (DescriptorSource, Events) -> Void
  ) {
    self.init(
      fileDescriptor: fileDescriptor, label: label, interest: interest, order: order,
      onTeardown: nil, handler: handler)
  }

  /// `onTeardown` is called (with the thread id) if the owning loop is torn down while the
  /// source is registered; ports use it to refuse later sends. `isMainQueue` marks the main
  /// loop's source on libdispatch's main-queue handle. The handler is a plain closure: the
  /// public initialiser has the `sending` proof, `IsolatedLoop` the thread check.
  init(
    fileDescriptor: Int32,
    label: String?,
    interest: Events,
    order: Int,
    onTeardown: (@Sendable (String) -> Void)?,
    isMainQueue: Bool = false,
    ownsDescriptor: Bool = false,
    membership: (any DescriptorMembership)? = nil,
    messages: (any AcceptedMessages)? = nil,
    beforeNextWait: (@Sendable () -> Void)? = nil,
    releasesOnLoopThread: Bool = false,
    handler: @escaping (DescriptorSource, Events) -> Void
  ) {
    self.beforeNextWait = beforeNextWait
    self.messages = messages
    self.binding = ItemBinding.make(
      kind: .descriptorSource, releasesOnLoopThread: releasesOnLoopThread)
    self.isMainQueue = isMainQueue
    self.ownsDescriptor = ownsDescriptor || isMainQueue || onTeardown != nil
    self.membership = membership
    self.fileDescriptor = fileDescriptor
    self.label = label
    self.storedInterest = interest.intersection([.readable, .writable])
    self.order = order
    self.onTeardown = onTeardown
    self.storedHandler = handler
  }

  /// What the source waits for: `.readable`, `.writable` or both. Error and hang-up are reported
  /// whatever it holds.
  public var interest: Events { binding.lock.withLock { storedInterest } }

  /// Changes what the source waits for, in every mode it is in, and resumes polling after a
  /// hang-up or error was reported. Safe from any thread, including the handler. Throws for a
  /// source that was told `invalidDescriptor`: its fd names another file now, if any.
  public func setInterest(_ interest: Events) throws(LoopError) {
    let value = interest.intersection([.readable, .writable])
    let owner = binding.lock.withLock { () -> Loop? in
      if let loop = binding.ownerUnlocked { return loop }
      storedInterest = value
      return nil
    }
    try owner?.changeInterest(of: self, to: value) { storedInterest = value }
  }

  /// True while the source polls nothing although it is in a mode: after it reported an error
  /// or a full hang-up, until ``setInterest(_:)`` resumes it, or for good once it was told
  /// `invalidDescriptor`. A C library that hands over a socket's interest on every callback
  /// (curl's socket callback) can simply call `setInterest` each time: it un-parks a parked
  /// source and is a plain `epoll_ctl` otherwise. False for a source in no mode. Safe from any
  /// thread. CF has no counterpart (a `CFFileDescriptor` is disabled after every callback).
  public var isParked: Bool {
    guard let owner = binding.lock.withLock({ binding.ownerUnlocked }) else { return false }
    return owner.lock.withLock { registrations.contains { $0.parked || $0.stale } }
  }

  /// False once the source was invalidated or its loop torn down. Mirrors
  /// `CFRunLoopSourceIsValid`.
  public var isValid: Bool { binding.isValid }

  /// Unregisters the source from every mode; its handler is never called again. The handler,
  /// and whatever it captured, is released once every lock is let go. A handler call already
  /// under way on the loop's thread finishes.
  public func invalidate() {
    invalidateFirst()
  }

  /// `invalidate()` that says whether this call did it: only that call has detached the source
  /// from every mode when it returns (a second, concurrent call returns at once), so only it
  /// may close a descriptor the library owns.
  @discardableResult
  func invalidateFirst() -> Bool {
    invalidateReleasing { storedHandler.take() }
  }

  /// The handler while the source is valid, nil after it was invalidated. (Locked by hand: a
  /// closure handed through a generic accessor is re-abstracted, which allocates a thunk on
  /// every delivery.)
  var handler: Handler? {
    binding.lock.lock()
    defer { binding.lock.unlock() }
    return binding.isValidUnlocked ? storedHandler : nil
  }

  /// The interest as an epoll mask; the caller must hold `binding.lock`.
  var epollMaskUnlocked: UInt32 {
    var mask = CRL_EPOLLRDHUP
    if storedInterest.contains(.readable) { mask |= CRL_EPOLLIN }
    if storedInterest.contains(.writable) { mask |= CRL_EPOLLOUT }
    return mask
  }

  static func events(fromEpoll mask: UInt32) -> Events {
    var events: Events = []
    if mask & CRL_EPOLLIN != 0 { events.insert(.readable) }
    if mask & CRL_EPOLLOUT != 0 { events.insert(.writable) }
    if mask & CRL_EPOLLERR != 0 { events.insert(.error) }
    if mask & (CRL_EPOLLHUP | CRL_EPOLLRDHUP) != 0 { events.insert(.hangUp) }
    return events
  }
}

/// What a library-made source (a signal source) does when it joins its first mode and leaves
/// its last. Both run with the loop's lock held, so neither may call back into the loop.
protocol DescriptorMembership: Sendable {
  /// Before the first registration; throwing refuses the add.
  func willJoinFirstMode() throws(LoopError)
  /// After the last registration went (removal, invalidation or teardown), or when the first
  /// add failed after `willJoinFirstMode`.
  func didLeaveLastMode()
}

/// A descriptor source's registration in one mode's epoll set.
struct DescriptorRegistration {
  unowned let mode: ModeState
  let token: UInt64
  /// True after a hang-up or error was reported: the fd is out of the epoll set until the
  /// interest is set again.
  var parked = false
  /// True when the fd was found to name another file than the one registered (closed, or
  /// closed and reused): parked, after one `invalidDescriptor` report if the handler had not
  /// been called since the last confirmation.
  var stale = false
  /// The source's handler has been called (in any mode) since the kernel last confirmed that
  /// the fd names the file that was registered here (the add, a new interest, a rebuild, or a
  /// check). A registration found stale then is parked without a report: that call may have
  /// been its one call after the close (see `Loop+Descriptors.swift`).
  var calledSinceConfirmed = false
  /// The kernel confirmed the registration before the wait that brought this report, after
  /// the handler's last call: the report is delivered without asking it again. Cleared by a
  /// call and by anything that changes the registration (the first report after an add, a
  /// new interest or a rebuild is checked, so a close in between is reported).
  var deliverUnchecked = false
  /// A newer registration took this fd number in this mode: the fd was closed and its number
  /// reused, so this registration's file is not the one the number names (the delivery path
  /// reads this instead of hashing the number into `ModeState.tokenForDescriptor`).
  var superseded = false
}
