import Synchronization

/// A source that fires when someone signals it. Mirrors a version-0 `CFRunLoopSource`:
/// `signal()` marks it ready but, exactly as in CF, does not wake a sleeping loop; call
/// `Loop.wakeUp()` afterwards, or use `signalAndWake()`.
///
/// Differences from CF: callbacks are Swift closures instead of a context struct; the
/// source is bound to the first loop it is added to (CF lets a version-0 source join several
/// loops); adding it to a second loop throws. CF finds the signalled sources of a pass by
/// walking every source of the mode; here `signal()` hands the source to its loop, and a pass
/// looks only at what was signalled (`ReadySources`), however many sources the mode holds.
public final class ManualSource: @unchecked Sendable {  // state under binding.lock / the loop lock
  // First, next to the object's header and reference count: what a signal from another
  // thread touches, so that it reads one cache line of the source rather than two (with a
  // million sources, every line is a miss).
  let binding: ItemBinding
  /// Guarded by `binding.lock`.
  /// 0 while the source is not signalled; when it is, the `SignalClock` tick of its signal,
  /// which keeps equal orders first-come first-served. Written under `binding.lock`, read
  /// without it where the reader needs no more than the value: taking the ready sources from
  /// the inbox reads it for every source signalled, and the lock is one cache miss more per
  /// source once a loop holds many.
  private let signalState = Atomic<UInt64>(0)
  /// A name for traces and `debugDescription`; the loop does not use it otherwise.
  public let label: String?
  /// Lower orders are performed first when several sources are signalled.
  public let order: Int

  /// The three callbacks, kept together so invalidation drops them in one go.
  struct Callbacks {
    let schedule: (@Sendable (Loop, Loop.Mode) -> Void)?
    let cancel: (@Sendable (Loop, Loop.Mode) -> Void)?
    let perform: () -> Void
  }

  /// Guarded by `binding.lock`; nil once the source is invalid, so nothing it captured
  /// outlives its usefulness (CF's invalidate releases the source's context the same way).
  @exclusivity(unchecked) private var callbacks: Callbacks?
  /// A mode this source is in, and where the source sits in that mode's ready sources.
  struct Slot {
    /// Unowned: a source leaves every mode before the loop lets the mode go (teardown detaches
    /// every item first), and reading it on each move among the ready sources then costs no
    /// reference counting.
    unowned(unsafe) let mode: ModeState
    var readyIndex = ReadySources.absent
    /// Where the source sits in the mode's `ManualSourceList`.
    var listIndex = 0
  }
  /// The modes this source is in. Guarded by the owner loop's lock.
  @exclusivity(unchecked) var slots = ManualSourceSlots()

  /// - Parameters:
  ///   - label: a name for traces and `debugDescription`.
  ///   - order: lower orders are performed first (CF's `order`).
  ///   - schedule: called on the adding thread each time the source joins a mode.
  ///   - cancel: called each time it leaves a mode (removal, invalidation, loop teardown).
  ///   - perform: called on the loop's thread when the source is performed. A `sending`
  ///     closure: it may capture a non-Sendable value the caller hands over (the source runs
  ///     on one loop only). `schedule` and `cancel` stay `@Sendable`: they run on whichever
  ///     thread adds or removes the source.
  public convenience init(
    label: String? = nil,
    order: Int = 0,
    schedule: (@Sendable (Loop, Loop.Mode) -> Void)? = nil,
    cancel: (@Sendable (Loop, Loop.Mode) -> Void)? = nil,
    perform: sending @escaping () -> Void
  ) {
    self.init(
      label: label, order: order, schedule: schedule, cancel: cancel, isolatedPerform: perform,
      releasesOnLoopThread: false)
  }

  /// The public initialiser with a plain `perform`: that one has the `sending` proof,
  /// `IsolatedLoop.addManualSource` the thread check.
  init(
    label: String?, order: Int, schedule: (@Sendable (Loop, Loop.Mode) -> Void)? = nil,
    cancel: (@Sendable (Loop, Loop.Mode) -> Void)? = nil,
    isolatedPerform perform: @escaping () -> Void, releasesOnLoopThread: Bool
  ) {
    self.binding = ItemBinding.make(
      kind: .manualSource, releasesOnLoopThread: releasesOnLoopThread)
    self.label = label
    self.order = order
    self.callbacks = Callbacks(schedule: schedule, cancel: cancel, perform: perform)
  }

  /// Marks the source ready to be performed on the loop's next pass. Safe from any thread.
  /// Does not wake the loop (except one embedded in a host's loop and idle between passes:
  /// see `LoopEmbedding`). Signalling an already signalled source keeps its original place
  /// in line; signalling an invalid source does nothing.
  public func signal() {
    _ = markSignalled()
  }

  /// `signal()` followed by a wake-up of the loop the source belongs to.
  public func signalAndWake() {
    markSignalled()?.wakeUp()
  }

  /// Sets the flag and, when that changed it and the source is bound, hands the source to its
  /// loop (`Loop.handOverLocked`). Returns the loop the source is bound to, if any.
  private func markSignalled() -> Loop? {
    binding.lock.lock()
    let owner = binding.ownerUnlocked
    guard isValidLocked, signalState.load(ordering: .relaxed) == 0 else {
      binding.lock.unlock()
      return owner
    }
    signalState.store(SignalClock.next(), ordering: .releasing)
    // Handed to the loop before the unlock: a thread that finds the flag set (and so only
    // wakes the loop, in `signalAndWake`) must find the source in the inbox and the count
    // moved, or the pass it wakes would look and find nothing. (The inbox's lock is a leaf
    // lock, taken under no other but this.) An unbound source is found signalled when it
    // joins its first mode.
    let tracedAt = owner?.handOverLocked(self)
    binding.lock.unlock()
    TestPausePoint.reach(.signalHandedOver, by: self)
    owner?.signalHandedOver(self, tracedAt: tracedAt ?? nil)
    return owner
  }

  /// True from `signal()` until the loop performs the source or it is invalidated.
  public var isSignalled: Bool { signalState.load(ordering: .acquiring) != 0 }

  /// False once the source was invalidated or its loop torn down. Mirrors
  /// `CFRunLoopSourceIsValid`.
  public var isValid: Bool { binding.isValid }

  /// Removes the source from every mode (calling `cancel` for each) and ignores later signals.
  /// Then releases the three callbacks and whatever they captured, after every lock is let go
  /// (a captured object's `deinit` may call back into the loop). A `perform` already under way
  /// on the loop's thread finishes.
  public func invalidate() {
    invalidateReleasing { () -> Callbacks? in
      signalState.store(0, ordering: .releasing)
      return callbacks.take()
    }
  }

  private var isValidLocked: Bool {
    // Called with binding.lock held; ItemBinding's own accessor would re-lock.
    binding.isValidUnlocked
  }

  /// Clears the signal if set; returns the callback to perform now, or nil.
  func consumeSignal() -> (() -> Void)? {
    // Locked by hand: a closure handed out of the generic `withLock` is re-abstracted there
    // and back, which allocates two thunks on every perform.
    binding.lock.lock()
    defer { binding.lock.unlock() }
    guard signalState.load(ordering: .relaxed) != 0, binding.isValidUnlocked,
      let perform = callbacks?.perform
    else { return nil }
    signalState.store(0, ordering: .releasing)
    return perform
  }

  /// The schedule and cancel callbacks, while the source is valid.
  var scheduleCallback: (@Sendable (Loop, Loop.Mode) -> Void)? {
    binding.lock.withLock { callbacks?.schedule }
  }
  var cancelCallback: (@Sendable (Loop, Loop.Mode) -> Void)? {
    binding.lock.withLock { callbacks?.cancel }
  }

  var signalKey: (signalled: Bool, sequence: UInt64) {
    let sequence = signalState.load(ordering: .acquiring)
    return (sequence != 0, sequence)
  }

  /// Records where the source sits in `list` (a mode's `ManualSourceList`). Under the loop's
  /// lock.
  @inline(__always)
  func setListIndex(_ index: Int, in list: ManualSourceList) {
    for position in slots.indices where slots[position].mode.manualSources === list {
      slots[position].listIndex = index
      return
    }
  }

  /// Records where the source sits in `ready` (a mode's `ReadySources`). Under the loop's lock.
  @inline(__always)
  func setReadyIndex(_ index: Int, in ready: ReadySources) {
    for position in slots.indices where slots[position].mode.ready === ready {
      slots[position].readyIndex = index
      return
    }
  }
}
