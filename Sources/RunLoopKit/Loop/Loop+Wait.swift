/// The wait phase of a pass: the "wait" step of the iteration in *Anatomy of an iteration*, read
/// top to bottom in `waitForEvents`, one call per step.
///
/// Where it sleeps: in `epoll_wait` on the mode's set when the mode has descriptors to watch,
/// otherwise on the loop's futex; either way with the mode's next timer as the deadline. Both
/// wake for a posted block, a stop or `wakeUp()`; the futex saves the eventfd write, the epoll
/// wake-up callback and the extra syscalls around them on every wake (measured by
/// `runloop-bench`: the bare futex wakes in less time than the bare eventfd + `epoll_wait`).
///
/// Lock discipline: the loop's lock is taken to prepare (re-arm, drain), to commit to sleeping
/// (so a poster knows whether, and how, to wake it), and to sort out what woke it — never
/// across the kernel wait itself.
extension Loop {
  struct WakeResult {
    var timerExpired = false
    var ready: [Epoll.Event] = []
    /// The mode should shed the registrations it could not remove now, or report stale ones
    /// found outside a pass (`ModeState.descriptorPhaseDue`).
    var shedDue = false
    /// The loop's wait count once this wait returned: a handler that runs a nested run makes
    /// it move on, and what this wait read may no longer be so.
    var waitCount: UInt64 = 0
    /// When the wake-up that ended a sleep was asked for (`.adaptive` only).
    var wakeAskedAt: LoopClock.Instant?
  }

  /// What the kernel wait returned, and when the thread slept in it (nil for a poll).
  struct KernelWait {
    var count = 0
    var slept: (start: LoopClock.Instant, end: LoopClock.Instant)?
    /// For a sleep on the futex: the wake-up count it slept on (a different count now means
    /// a wake-up was sent).
    var futexSeen: UInt32?
    /// See `Commitment.timerDue`.
    var timerDue = false
    /// The mode's timer date the epoll wait's timeout carried (see `Commitment`).
    var timerDateInTimeout: LoopClock.Instant?
  }

  /// What `commitToWait` decided: whether to block, since when, and on what.
  struct Commitment {
    var sleptAt: LoopClock.Instant?
    /// Set when the loop sleeps on its futex: the count read under the lock, and the deadline
    /// (the run's or the mode's next timer, whichever is first; nil for none).
    var futexSeen: UInt32?
    var futexDeadline: LoopClock.Instant?
    /// After the futex sleep, look at the mode's epoll set without waiting (a mode whose set
    /// could not be rebuilt: see `ModeState.rebuildFailed`).
    var pollAfterSleep = false
    /// The mode's timer date had passed: this wait only looks, and the timers fire after it.
    var timerDue = false
    /// For a sleep in the mode's epoll set: the mode's timer date when the wait's own timeout
    /// carries it instead of the timerfd.
    var epollTimerDeadline: LoopClock.Instant?
  }

  /// How long a mode whose epoll set could not be rebuilt sleeps between looks at it.
  static let degradedPollInterval = Duration.milliseconds(10)

  /// Sleeps in the mode's epoll set until a descriptor, the mode's timer or the wake-up port
  /// fires, or the deadline passes. With `poll` it only looks, without sleeping.
  func waitForEvents(
    in mode: ModeState, until deadline: LoopClock.Instant?, poll: Bool
  ) -> WakeResult {
    // A nested run that waits inside a callout is not stuck: a stall watch is told (a look
    // that does not sleep is not a wait).
    let published = !poll && calloutBoard.waitBeginsIfPublished()
    defer { if published { calloutBoard.waitEnds() } }
    if let virtualClock {
      return waitVirtually(in: mode, until: deadline, poll: poll, on: virtualClock)
    }
    // The set is held for the whole wait: a rebuild may swap the mode's set meanwhile.
    let epoll: Epoll
    let policy: WaitPolicy
    let spin: SpinOutcome
    let commitment: Commitment
    runDrainsBeforeWait()
    if poll {
      // No spin comes between preparing and committing: one hold of the lock does both.
      lock.lock()
      (epoll, policy) = prepareToWaitLocked(in: mode)
      commitment = commitToWaitLocked(poll: true, spun: false, in: mode, until: deadline)
      if !kernelLookNeededLocked(mode) {
        // Still in the same hold: a look that neither spins nor sleeps has no trace to record
        // and nothing for the adaptive policy to learn.
        counters.looksWithoutKernel += 1
        let wait = KernelWait(timerDue: commitment.timerDue)
        let (result, _) = sortOutWakeLocked(
          found: nil, wait: wait, from: epoll, in: mode, naming: false)
        lock.unlock()
        return result
      }
      lock.unlock()
      spin = SpinOutcome()
    } else {
      lock.lock()
      (epoll, policy) = prepareToWaitLocked(in: mode)
      lock.unlock()
      spin = spinIfAsked(policy, on: epoll, until: deadline)
      // A spin that ran into the deadline leaves nothing to sleep for. (The clock is read
      // only when the window ran out, on the way to a sleep.)
      let spunOut = spin.ran && spin.found == nil && deadline.map { $0 <= .now } == true
      // Read before the lock: the locked closure would capture (copy) the whole outcome.
      let spun = spin.found != nil
      lock.lock()
      commitment = commitToWaitLocked(poll: spunOut, spun: spun, in: mode, until: deadline)
      lock.unlock()
    }
    let wait =
      spin.found == nil
      ? waitInKernel(on: epoll, of: mode, until: deadline, as: commitment)
      : KernelWait(timerDue: commitment.timerDue)
    // Asked for after the wait, so a tracer attached while the loop slept records that sleep.
    let sink = traceSink(mode.mode)
    let (result, wokenBy) = sortOutWake(
      spin: spin, wait: wait, from: epoll, in: mode, naming: sink != nil)
    if let sink { trace(spin, wait, wokenBy, to: sink) }
    if policy == .adaptive { learn(from: spin, wait, result) }
    return result
  }

  /// Feeds the adaptive policy the gap this wait measured: from the start of the wait to the
  /// moment work arrived (found by the spin, or asked to wake the sleep). Waits ended by a
  /// timer, a deadline or a descriptor teach it nothing about posts.
  private func learn(from spin: SpinOutcome, _ wait: KernelWait, _ result: WakeResult) {
    if spin.ran { adaptiveSpin.spinEnded(found: spin.found != nil) }
    let start = spin.began ?? wait.slept?.start
    let arrival = spin.foundAt ?? result.wakeAskedAt
    if let start, let arrival { adaptiveSpin.record(gap: start.duration(to: arrival)) }
  }

  /// Runs what handlers left for before the next wait (ports drain their eventfd), notes the
  /// mode's timer date if its timers changed (arming the timerfd only where the wait's own
  /// timeout cannot carry it) and drains the wake-up eventfd; returns the set to wait on and
  /// the policy to wait by.
  func prepareToWait(in mode: ModeState) -> (Epoll, WaitPolicy) {
    runDrainsBeforeWait()
    return lock.withLock { prepareToWaitLocked(in: mode) }
  }

  /// The first half of `prepareToWait`, run before the lock is taken.
  private func runDrainsBeforeWait() {
    if !drainsBeforeWait.isEmpty {
      for source in drainsBeforeWait { source.beforeNextWait?() }
      drainsBeforeWait.removeAll(keepingCapacity: true)
    }
  }

  /// The second half of `prepareToWait`, under the lock.
  @inline(__always)
  private func prepareToWaitLocked(in mode: ModeState) -> (Epoll, WaitPolicy) {
    do {
      checkCalledSourcesLocked(in: mode)
      mode.prepareTimer(arming: timerFDNeededLocked(mode))
      // The wake-up eventfd is drained here, before the next wait, rather than right after
      // the wake: that keeps a read syscall off the path from wake-up to the posted work.
      // A write decided under the lock may land only after this drain (it is made after the
      // poster releases the lock). An epoll wait then returns at once with the eventfd
      // readable, which `wakeFDReadable` catches so the following wait drains it; but a futex
      // sleep reads no eventfd, and the write would be found by some later epoll wait, a
      // wake-up nobody asked for. So the eventfd counts as written until a drain finds no
      // write on its way (checked first: a write that lands after the check is drained).
      drainWakeFDLocked()
      // A mode whose set could not be rebuilt must not spin on it either: an unowned
      // registration in it reports at once, so a spin would find it on every turn.
      return (mode.epoll, mode.rebuildFailed ? .sleep : self.policy)
    }
  }

  /// Drains the wake-up eventfd if a write may have reached it, and lets the next wake-up be
  /// sent (see `prepareToWait` for why it counts as written until a drain finds none on its
  /// way).
  func drainWakeFDLocked() {
    if wakeFDWritten || wakeFDReadable {
      wakeFDWritten = wakeFD?.hasSignalsInFlight == true
      wakeFDReadable = false
      _ = try? wakeFD?.drain()
    }
    wakeWritten = false
  }

  /// Decides, under the lock posters take, whether this wait blocks: not when asked to poll,
  /// not after a spin found work, and not when a wake-up was asked for while the pass was busy
  /// (answered by not sleeping), nor when a posted block waits (see `PostQueue`). A poster that
  /// sees `asleep` wakes the loop. A mode with no
  /// descriptor to watch sleeps on the futex: the count is read here, under the lock, so a
  /// wake-up sent after the lock is released changes it and the sleep does not begin.
  /// `sleptAt` is read under the lock too, so that `metrics` can count a sleep in progress.
  // Inlined into its one caller: called, it cost a zero-length pass 26 more instructions
  // (callgrind), once a helper it calls made the compiler stop inlining it.
  @inline(__always)
  private func commitToWaitLocked(
    poll: Bool, spun: Bool, in mode: ModeState, until deadline: LoopClock.Instant?
  ) -> Commitment {
    do {
      var poll = poll
      if wakeAskedForLocked {
        clearWakeRequestLocked()
        poll = true
      }
      sleeping = !poll && !spun
      // A mode whose timer date has passed already (a zero delay, a pass that ran late) only
      // looks: sleeping until a date in the past still waits for the kernel's next timer
      // interrupt (measured here: ~14 µs per such sleep, with a `loop.sleep(for: .zero)`).
      // A look fires such timers too: a disarmed timerfd does not report them.
      let timerDue = mode.hasTimerDue(at: .now)
      if timerDue { sleeping = false }
      if sleeping {
        // Said before the last look at the posted blocks: a poster that writes its block
        // after this look finds `asleep` set and wakes the sleep (see `PostQueue`). Blocks
        // another thread moved out of the queue meanwhile (`hasBlocksLocked`) count too.
        // A wake-up asked for without the lock after the check above is read here, as the
        // posted blocks are (see `wakeUp`).
        TestPausePoint.reach(.sleepDecided, by: self)
        asleep.store(true, ordering: .sequentiallyConsistent)
        if posted.hasWaiting || !blocks.isEmpty
          || wakeAsked.load(ordering: .sequentiallyConsistent)
        {
          asleep.store(false, ordering: .relaxed)
          sleeping = false
          _ = wakeAsked.exchange(false, ordering: .sequentiallyConsistent)
        }
      }
      sleepStart = sleeping ? .now : nil
      sleepingOnFutex = sleeping && (mode.descriptors.isEmpty || mode.rebuildFailed)
      guard sleepingOnFutex else {
        let timerDate = sleeping ? carryTimerDateLocked(of: mode) : nil
        return Commitment(sleptAt: sleepStart, timerDue: timerDue, epollTimerDeadline: timerDate)
      }
      // The earlier of the two, without building an array on every sleep.
      let armed = mode.armedDeadline
      var until = deadline.map { min($0, armed ?? $0) } ?? armed
      if mode.rebuildFailed, let start = sleepStart {
        // A registration the loop could not shed may report at any moment: sleeping in the
        // set would return at once, again and again. Short sleeps between looks instead.
        let look = start.advanced(by: Loop.degradedPollInterval)
        until = min(until ?? look, look)
      }
      futexSleepMode = ObjectIdentifier(mode)
      futexSleepUntil = until
      return Commitment(
        sleptAt: sleepStart, futexSeen: futex.value, futexDeadline: until,
        pollAfterSleep: mode.rebuildFailed)
    }
  }

  /// Whether a look that does not sleep must ask the kernel: only when `mode`'s epoll set
  /// holds something whose readiness the loop cannot know otherwise. A mode with no
  /// descriptor to watch (the one that sleeps on the futex) holds only the loop's own: the
  /// wake-up eventfd, whose writes only end sleeps (the work they announce is in the post
  /// queue, a drain before the next epoll sleep empties it, and a look counts no wake), and
  /// the timerfd, whose date the clock already answered (`Commitment.timerDue`). Such a pass
  /// makes no syscall, where CF polls its port set every pass (libuv skips its poll the same
  /// way when it watches no descriptor): the kernel has nothing to say.
  /// An embedded mode's set is what its host watches, so its looks keep draining it; a set
  /// that may hold registrations the loop lost track of (or could not rebuild) is looked at.
  @inline(__always)
  func kernelLookNeededLocked(_ mode: ModeState) -> Bool {
    !mode.descriptors.isEmpty || mode.rebuildFailed || !mode.untrackedTokens.isEmpty
      || embeddedMode === mode
  }

  /// Decides, for a sleep in `mode`'s epoll set, what ends it at the mode's timer date, and
  /// returns that date if the wait's own timeout is to carry it. A date soon to come goes in
  /// the timeout: `epoll_pwait2` takes it with no syscall of its own, where arming the timerfd
  /// is a `timerfd_settime` each time the date moves (5.7 µs here for a date less than a
  /// millisecond away, as it reprograms the hardware timer, a VM exit) and a `read` after it
  /// went off. A distant date goes in the timerfd: the kernel lets a wait's timeout run late
  /// by 0.1 % of its length (up to 100 ms; `select_estimate_accuracy`), whatever the thread's
  /// slack, and arming a timer that is not the next one due is cheap (0.8 µs here).
  func carryTimerDateLocked(of mode: ModeState) -> LoopClock.Instant? {
    epollSleepMode = ObjectIdentifier(mode)
    epollSleepTimerDate = nil
    // A timerfd left armed at another date (or with no timer left) would end the sleep for
    // nothing: it is disarmed, unless it is to carry the date.
    guard let date = mode.armedDeadline else {
      mode.syncTimerFD(arming: false)
      return nil
    }
    if mode.timerFD.armedDeadline == date { return nil }
    // Whole milliseconds (the `epoll_wait` fallback) would make a near timer up to 1 ms late.
    if !Epoll.timeoutsArePrecise
      || LoopClock.Instant.now.duration(to: date) > Loop.timeoutCarriesTimerDatesWithin
    {
      mode.syncTimerFD(arming: true)
      return nil
    }
    mode.syncTimerFD(arming: false)
    epollSleepTimerDate = date
    return date
  }

  /// How near a timer date must be for an epoll wait's timeout to carry it: the kernel's
  /// lateness for such a timeout (0.1 % of it) stays under 10 µs.
  static let timeoutCarriesTimerDatesWithin = Duration.milliseconds(10)

  /// Whether `mode`'s timerfd must hold the mode's timer date: the loop may spin (a spin
  /// looks at the set, not the clock), is embedded in a host's loop (whose descriptor reports
  /// the set), or sleeps in the mode's set now and the timerfd is what ends that sleep at the
  /// date (another thread's change must move it) or the date came before the one the wait's
  /// timeout carries (a timer another thread added or moved earlier). Otherwise the loop's own
  /// wait carries the date (the futex's deadline, or the epoll wait's timeout, decided in
  /// `commitToWait`), and a date moved later ends that sleep once for nothing. Reads the date
  /// the mode noted last (`ModeState.noteTimerDate`).
  func timerFDNeededLocked(_ mode: ModeState) -> Bool {
    if policy != .sleep || embeddedMode === mode { return true }
    guard sleeping, !sleepingOnFutex, epollSleepMode == ObjectIdentifier(mode) else {
      return false
    }
    // The timerfd carries the sleep's date, or another thread armed it since: keep it in step
    // (a timerfd left at an earlier date would end the sleep for nothing).
    guard let carried = epollSleepTimerDate, mode.timerFD.armedDeadline == nil else {
      return true
    }
    return mode.armedDeadline.map { $0 < carried } ?? false
  }

  /// A change made from another thread that a loop asleep on its futex in `mode` must see
  /// now (a descriptor to watch, or a timer due before the futex deadline): wakes it so the
  /// next wait is planned again. With `date`, only a sleep that would last past `date` is
  /// woken; without, any. Rare, so it wakes under the lock.
  func wakeFutexSleeperLocked(in mode: ModeState, forDeadline date: LoopClock.Instant? = nil) {
    guard sleepingOnFutex, futexSleepMode == ObjectIdentifier(mode) else { return }
    if let date, let until = futexSleepUntil, until <= date { return }
    sendHoldingLock(requestWakeLocked())
  }

  /// Waits in the kernel: blocks until an event or the deadline, or only looks (when the
  /// commitment does not block). A signal (EINTR) makes it wait again for the time that is
  /// actually left.
  private func waitInKernel(
    on epoll: Epoll, of mode: ModeState, until deadline: LoopClock.Instant?,
    as commitment: Commitment
  ) -> KernelWait {
    if let seen = commitment.futexSeen, let sleptAt = commitment.sleptAt {
      do {
        let until = commitment.futexDeadline.flatMap { $0 == .distantFuture ? nil : $0 }
        if until != nil { lowerTimerSlackOnce() }
        try futex.wait(whileValueIs: seen, until: until)
      } catch {
        preconditionFailure("sleeping on the futex of mode \(mode.mode) failed: \(error)")
      }
      let slept = (sleptAt, LoopClock.Instant.now)
      // A look that fails leaves the events to the next one.
      let found = commitment.pollAfterSleep ? (try? epoll.wait(timeoutNanoseconds: 0)) ?? 0 : 0
      return KernelWait(count: found, slept: slept, futexSeen: seen)
    }
    let blocking = commitment.sleptAt != nil
    // The earlier of the run's deadline and the mode's timers', when the timeout carries those.
    let timers = commitment.epollTimerDeadline
    let deadline = timers.map { timers in deadline.map { min($0, timers) } ?? timers } ?? deadline
    if blocking, deadline != nil { lowerTimerSlackOnce() }
    var count: Int?
    while count == nil {
      // Recomputed on every try, so signals interrupting the wait never stretch the deadline.
      var timeout: Int64 = blocking ? -1 : 0
      if blocking, let deadline {
        timeout = max(0, LoopClock.Instant.now.duration(to: deadline).saturatedNanoseconds)
      }
      do {
        count = try epoll.wait(timeoutNanoseconds: timeout)
      } catch {
        preconditionFailure("waiting on the epoll set of mode \(mode.mode) failed: \(error)")
      }
    }
    return KernelWait(
      count: count ?? 0, slept: commitment.sleptAt.map { ($0, .now) },
      timerDue: commitment.timerDue, timerDateInTimeout: timers)
  }

  /// A sleep with a deadline (the futex's, `epoll_pwait2`'s timeout) is an hrtimer that Linux
  /// may fire as late as the thread's timer slack, 50 µs by default; measured here in C, a
  /// 1 ms futex wait came back 80–105 µs late with that slack and 28–30 µs with 1 ns, as late
  /// as a timerfd (which ignores slack). The deadline already holds the timers' tolerance
  /// (`TimerHeap.wakeDeadline`), so the kernel should add nothing to it: the loop asks for
  /// the least slack, once, the first time it sleeps with a deadline (a `prctl` per sleep
  /// would cost a syscall). A failure only leaves the thread's slack as it was.
  private func lowerTimerSlackOnce() {
    guard !timerSlackLowered else { return }
    timerSlackLowered = true
    try? TimerSlack.setCurrentThread(nanoseconds: TimerSlack.least)
  }
}
