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
  @exclusivity(unchecked) private(set) var epoll: Epoll
  let timerFD: TimerFD

  let manualSources = ManualSourceList()
  /// The signalled ones among them, by order then signal time.
  let ready = ReadySources()
  /// How many times the manual-source phase took the lock to look for ready sources (for
  /// tests: a quiet mode is not looked at again until something is signalled).
  @exclusivity(unchecked) var manualLooks = 0
  /// Registered descriptor sources, by epoll token.
  let descriptors = DescriptorTable()
  /// The tokens of the registrations whose handler was called since this mode's last wait,
  /// to be checked before the next one (see `Loop+Descriptors.swift`); a token no longer in
  /// `descriptors` was removed meanwhile and needs no check. Guarded by the loop's lock.
  @exclusivity(unchecked) var calledSinceWait: [UInt64] = []
  /// Which token currently owns each fd number in this epoll set. Needed because epoll
  /// identifies a registration by fd number on removal: if a source's fd was closed and the
  /// number reused by a newer source, removing the old source must not unregister the new one.
  @exclusivity(unchecked) var tokenForDescriptor: [Int32: UInt64] = [:]
  /// Registrations the kernel may still hold in this set although no source watches them any
  /// more, with the loop's wait count when each was let go: their fd number was closed, or
  /// handed to another file, before the registration could be removed by it. Such a
  /// registration lives on for as long as its file is open somewhere else (a `dup`, a child
  /// process), reporting level-triggered, and only a new set sheds it; if its file was closed
  /// everywhere, the kernel dropped it already. So the one unowned event that calls for a
  /// rebuild is one for these tokens from a wait that returned after the token was let go:
  /// proof the registration outlived its number. Any other event no source owns was read
  /// before its registration was removed or let go (a handler earlier in the same pass closed
  /// or invalidated the source) and is simply stale. Emptied by a rebuild.
  @exclusivity(unchecked) var untrackedTokens: [UInt64: UInt64] = [:]
  /// The last rebuild could not make a new set (the process was out of descriptors): the
  /// loop polls this mode's set between short sleeps instead of sleeping in it, since an
  /// unowned registration that reports would wake it at once, over and over (see
  /// `Loop+Wait.swift`), and tries again on each pass.
  @exclusivity(unchecked) var rebuildFailed = false

  /// The set should be rebuilt on this pass even though no unowned registration reported:
  /// the last rebuild failed (it is tried again on every pass until one succeeds, or the mode
  /// would poll for good), or enough untracked registrations have piled up (fds closed before
  /// their sources were removed, which is common) — once there are more than the set has live
  /// ones, a rebuild costs at most one syscall per untracked registration it sheds.
  var shedDue: Bool { rebuildFailed || untrackedTokens.count > max(64, descriptors.count) }
  /// Registrations a rebuild made outside a pass found stale (an add that had to shed a
  /// leftover registration: see `Loop.registerLocked`), to be reported to their handlers by
  /// the mode's next descriptor phase, as a rebuild within a pass reports them.
  @exclusivity(unchecked) var staleToReport: [UInt64] = []
  /// The next descriptor phase has work even with no event: a shed, or reports to make.
  var descriptorPhaseDue: Bool { shedDue || !staleToReport.isEmpty }
  let timers = TimerHeap()
  private let observerSet = ItemSet<LoopObserver>(identity: ObjectIdentifier.init)
  /// `observerSet` by order, equal orders in the order they were added; rebuilt on the first
  /// notification after a change, so adding or removing an observer stays O(1).
  private var sortedObservers: [LoopObserver]? = []
  /// How many observers want each activity bit, so removing one updates the union in O(1).
  private var observersPerActivity = [Int](repeating: 0, count: UInt.bitWidth)
  /// Union of every observer's activities, so a pass skips notifying (and locking) when nobody
  /// listens. Written under the loop's lock, read without it.
  let observedActivities = Atomic<UInt>(0)

  /// The mode of a `VirtualLoop`'s loop: its timerfd is never armed, and the virtual wait
  /// jumps to `armedDeadline`.
  let isVirtual: Bool

  /// `Loop.manualSignals` when a look at this mode's manual sources last found none
  /// signalled, nil once one found one: until the count moves, the mode need not look again.
  /// Only the loop's thread touches it.
  @exclusivity(unchecked) var quietManualSignals: UInt64?
  /// Whether the mode is in the loop's common set (`.default` always is; a mode joins with
  /// `addCommonMode` and never leaves). Kept here so a drain need not search the set.
  @exclusivity(unchecked) var isCommon: Bool

  init(mode: Loop.Mode, wakeFD: EventFD, isVirtual: Bool = false) throws(LoopError) {
    self.mode = mode
    isCommon = mode.predefined == .defaultMode
    self.isVirtual = isVirtual
    epoll = try Epoll()
    timerFD = try TimerFD()
    try ModeState.watchLoopDescriptors(in: epoll, wakeFD: wakeFD, timerFD: timerFD)
  }

  /// Registers the loop's own descriptors in `set`: the wake-up eventfd and the mode's
  /// timerfd. If the kernel refuses either, `set` is left empty again and the error thrown.
  private static func watchLoopDescriptors(
    in set: Epoll, wakeFD: EventFD, timerFD: TimerFD
  ) throws(LoopError) {
    do throws(LoopError) {
      try set.add(wakeFD.fd, events: CRL_EPOLLIN, token: ModeState.wakeToken)
      try set.add(timerFD.fd, events: CRL_EPOLLIN, token: ModeState.timerToken)
    } catch {
      set.remove(wakeFD.fd)
      set.remove(timerFD.fd)
      throw error
    }
  }

  /// Sources and timers keep a mode alive; observers do not (as in CF). Queued blocks are
  /// checked by the loop, which owns the queue.
  var hasSourcesOrTimers: Bool {
    !manualSources.isEmpty || !descriptors.isEmpty || timerCount > 0
  }

  /// Timers in this mode, counting those taken out of the heap while their handler runs.
  /// `@exclusivity(unchecked)` here and on `timerNeedsArming`: the loop's lock makes access
  /// exclusive, and every timer add and cancel writes them.
  @exclusivity(unchecked) var timerCount = 0

  /// Steps taken by the mode's item sets, for tests that check how adding and removing scale.
  var itemSteps: Int { manualSources.steps + observerSet.steps }

  /// The observers in the order they are told: by order, then in the order they were added.
  var observers: [LoopObserver] {
    if let sortedObservers { return sortedObservers }
    let sorted = observerSet.orderedEntries
      .sorted { ($0.element.order, $0.sequence) < ($1.element.order, $1.sequence) }
      .map(\.element)
    sortedObservers = sorted
    return sorted
  }

  /// The observers of one activity, in the order they are told: built from `observers` on
  /// the first notification of that activity after a change, so a pass notifying an activity
  /// visits only the observers that want it, not every observer of the mode.
  /// Indexed by the activity's bit (a notification is of one activity).
  private var observersByActivity = [[LoopObserver]?](repeating: nil, count: UInt.bitWidth)

  func observers(of activity: Loop.Activity) -> [LoopObserver] {
    let bit = activity.rawValue.trailingZeroBitCount
    guard activity.rawValue.nonzeroBitCount == 1 else {
      return observers.filter { $0.activities.contains(activity) }
    }
    if let list = observersByActivity[bit] { return list }
    let list = observers.filter { $0.activities.contains(activity) }
    observersByActivity[bit] = list
    return list
  }

  /// The sorted lists are rebuilt on their next use (in place: an add allocates no table).
  private func forgetObserverOrder() {
    sortedObservers = nil
    for bit in observersByActivity.indices where observersByActivity[bit] != nil {
      observersByActivity[bit] = nil
    }
  }

  func insertObserver(_ observer: LoopObserver) {
    guard observerSet.insert(observer) else { return }
    forgetObserverOrder()
    countActivities(of: observer, by: 1)
  }

  func removeObserver(_ observer: LoopObserver) {
    guard observerSet.remove(observer) else { return }
    forgetObserverOrder()
    countActivities(of: observer, by: -1)
  }

  private func countActivities(of observer: LoopObserver, by change: Int) {
    var union: UInt = 0
    for bit in 0..<observersPerActivity.count {
      if observer.activities.rawValue & (1 << bit) != 0 { observersPerActivity[bit] += change }
      if observersPerActivity[bit] > 0 { union |= 1 << bit }
    }
    observedActivities.store(union, ordering: .relaxed)
  }

  /// Set when the heap changed on the loop's own thread: the timerfd is re-armed once, just
  /// before the loop next waits on this mode, instead of after every change.
  @exclusivity(unchecked) var timerNeedsArming = false

  /// When the mode's timers need the loop awake next (nil: no timer): the deadline the loop's
  /// own wait carries (the futex's, or the epoll wait's timeout), and what the timerfd holds
  /// when it must (see `Loop.timerFDNeededLocked`).
  private(set) var armedDeadline: LoopClock.Instant?

  /// Whether the date the mode's timers need the loop awake by (`armedDeadline`) has come at
  /// `instant`: the next look fires them. The clock is read only when there is a date (a
  /// pass that sleeps with no timer reads it no more than before).
  @inline(__always)
  func hasTimerDue(at instant: @autoclosure () -> LoopClock.Instant) -> Bool {
    guard let armedDeadline else { return false }
    return armedDeadline <= instant()
  }

  /// Notes the current earliest wake deadline in `armedDeadline`. The timerfd is left as it
  /// is: whether it is to hold the date is decided apart (`Loop.timerFDNeededLocked`, and the
  /// next wait's `Loop.commitToWait`), and disarming a timerfd that wait would arm again is
  /// two syscalls for nothing.
  func noteTimerDate() {
    timerNeedsArming = false
    armedDeadline = timers.wakeDeadline()
  }

  /// Before the loop waits on this mode: notes the date if its timers changed since (deferred
  /// by `Loop.timersChangedLocked`), and arms the timerfd at it when `arming`.
  func prepareTimer(arming: Bool) {
    if timerNeedsArming { noteTimerDate() }
    if arming { syncTimerFD(arming: true) }
  }

  /// Makes the timerfd hold `armedDeadline` when `arming`, and be disarmed otherwise; costs no
  /// syscall when it already does. Arming is a syscall that reprograms the hardware timer when
  /// the date is the next one due, expensive in a VM, so the loop's own wait carries the date
  /// wherever it can (a futex sleep's deadline, a near date in an epoll wait's timeout).
  func syncTimerFD(arming: Bool) {
    guard !isVirtual else { return }
    do {
      if arming {
        try timerFD.arm(at: armedDeadline)
      } else if timerFD.armedDeadline != nil {
        try timerFD.arm(at: nil)
      }
    } catch {
      preconditionFailure("re-arming the timer of mode \(mode) failed: \(error)")
    }
  }

  /// Takes the registration with `token` out of the set by its fd number, if the number is
  /// still that registration's; otherwise, or if the kernel finds nothing to remove, records
  /// the token as one the kernel may still hold (`untrackedTokens`, stamped with the loop's
  /// `waitCount`) and returns false: the number no longer names the file that was registered.
  @discardableResult
  func unregister(_ fd: Int32, token: UInt64, waitCount: UInt64) -> Bool {
    if tokenForDescriptor[fd] == token, epoll.remove(fd) { return true }
    untrackedTokens[token] = waitCount
    return false
  }

  /// Whether an event for `token`, from the wait that brought the loop's wait count to
  /// `waitCount`, shows a registration that outlived its fd number (see `untrackedTokens`).
  func isLiveUntracked(_ token: UInt64, reportedBy waitCount: UInt64) -> Bool {
    guard let letGo = untrackedTokens[token] else { return false }
    return letGo < waitCount
  }

  /// Fills `fresh` (an empty set) with the loop's own descriptors and `registrations`, and
  /// makes it the mode's set; the old one closes with its last reference. Returns the tokens
  /// whose fd the kernel refused (closed meanwhile). Throws, leaving the old set in place and
  /// `fresh` empty, when the kernel refuses one of the loop's own descriptors (out of memory,
  /// or of epoll watches).
  func replaceEpollSet(
    with fresh: Epoll, wakeFD: EventFD, registrations: [(fd: Int32, mask: UInt32, token: UInt64)]
  ) throws(LoopError) -> [UInt64] {
    try ModeState.watchLoopDescriptors(in: fresh, wakeFD: wakeFD, timerFD: timerFD)
    var refused: [UInt64] = []
    for registration in registrations {
      do throws(LoopError) {
        try fresh.add(registration.fd, events: registration.mask, token: registration.token)
      } catch {
        refused.append(registration.token)
      }
    }
    if let outer = embeddingSet {
      // The host watches the outer set: it now holds the new set (the old one goes).
      _ = outer.remove(epoll.fd)
      try? outer.add(fresh.fd, events: CRL_EPOLLIN, token: 0)
    }
    epoll = fresh
    untrackedTokens = [:]
    rebuildFailed = false
    return refused
  }

  /// For a `LoopEmbedding` of this mode: the epoll set the host watches, holding this mode's
  /// set. One level above the mode's own, so that a rebuild (which replaces the mode's set)
  /// leaves the host's descriptor as it was.
  @exclusivity(unchecked) var embeddingSet: Epoll?

  func close() {
    embeddingSet?.close()
    epoll.close()
    timerFD.close()
  }
}
