import CRunLoopShims
import Synchronization

/// Everything one mode of one loop holds: its items, its epoll set and its timerfd.
///
/// Each mode has its own epoll instance so running in mode M sleeps on exactly M's
/// descriptors and M's timer: "sources of other modes don't fire" falls out of the kernel
/// rather than being a filter. The loop's wake-up eventfd is registered in every mode's set.
/// Guarded by the owning loop's lock.
final class ModeState {
  /// epoll tokens reserved for the loop's own descriptors; sources get tokens above these.
  static let wakeToken: UInt64 = 1
  static let timerToken: UInt64 = 2

  let mode: Loop.Mode
  /// Replaced (never mutated in place) when the set has to be rebuilt.
  private(set) var epoll: Epoll
  let timerFD: TimerFD

  var manualSources: [ManualSource] = []
  /// Registered descriptor sources, by epoll token.
  var descriptors: [UInt64: DescriptorSource] = [:]
  /// Which token currently owns each fd number in this epoll set. Needed because epoll
  /// identifies a registration by fd number on removal: if a source's fd was closed and the
  /// number reused by a newer source, removing the old source must not unregister the new one.
  var tokenForDescriptor: [Int32: UInt64] = [:]
  let timers = TimerHeap()
  /// Sorted by order; equal orders keep the order they were added in.
  var observers: [LoopObserver] = []
  /// Union of every observer's activities, so a pass skips notifying (and locking) when nobody
  /// listens. Written under the loop's lock, read without it.
  let observedActivities = Atomic<UInt>(0)

  init(mode: Loop.Mode, wakeFD: EventFD) throws(LoopError) {
    self.mode = mode
    epoll = try Epoll()
    timerFD = try TimerFD()
    try epoll.add(wakeFD.fd, events: CRL_EPOLLIN, token: ModeState.wakeToken)
    try epoll.add(timerFD.fd, events: CRL_EPOLLIN, token: ModeState.timerToken)
  }

  /// Sources and timers keep a mode alive; observers do not (as in CF). Queued blocks are
  /// checked by the loop, which owns the queue.
  var hasSourcesOrTimers: Bool {
    !manualSources.isEmpty || !descriptors.isEmpty || timerCount > 0
  }

  /// Timers in this mode, counting those taken out of the heap while their handler runs.
  var timerCount = 0

  func insertObserver(_ observer: LoopObserver) {
    let index = observers.firstIndex { $0.order > observer.order } ?? observers.endIndex
    observers.insert(observer, at: index)
    observedActivities.store(
      observedActivities.load(ordering: .relaxed) | observer.activities.rawValue,
      ordering: .relaxed)
  }

  func removeObserver(_ observer: LoopObserver) {
    observers.removeAll { $0 === observer }
    let union = observers.reduce(into: Loop.Activity()) { $0.formUnion($1.activities) }
    observedActivities.store(union.rawValue, ordering: .relaxed)
  }

  /// Set when the heap changed on the loop's own thread: the timerfd is re-armed once, just
  /// before the loop next waits on this mode, instead of after every change.
  var timerNeedsArming = false

  /// Re-arms the timerfd for the current earliest wake deadline (or disarms it).
  func rearmTimer() {
    do {
      timerNeedsArming = false
      try timerFD.arm(at: timers.wakeDeadline())
    } catch {
      preconditionFailure("re-arming the timer of mode \(mode) failed: \(error)")
    }
  }

  /// Builds a fresh epoll set with the loop's own descriptors and `registrations`, and makes
  /// it the mode's set. Returns the tokens whose fd the kernel refused (closed meanwhile).
  func replaceEpollSet(
    wakeFD: EventFD, registrations: [(fd: Int32, mask: UInt32, token: UInt64)]
  ) throws(LoopError) -> [UInt64] {
    let fresh = try Epoll()
    try fresh.add(wakeFD.fd, events: CRL_EPOLLIN, token: ModeState.wakeToken)
    try fresh.add(timerFD.fd, events: CRL_EPOLLIN, token: ModeState.timerToken)
    var refused: [UInt64] = []
    for registration in registrations {
      do throws(LoopError) {
        try fresh.add(registration.fd, events: registration.mask, token: registration.token)
      } catch {
        refused.append(registration.token)
      }
    }
    epoll = fresh
    return refused
  }

  func close() {
    epoll.close()
    timerFD.close()
  }
}
