import Synchronization

/// One `VirtualLoop.runTask`: its task, where the task leaves its result, and the drive of the
/// loop between the waits for other threads that the two `runTask`s make in their own ways
/// (blocking, or suspending).
///
/// The drive is one pass at a time, each at the virtual now, until a pass does no work; then
/// one pass whose wait moves the clock to the mode's next timer (the sleep a real loop would
/// make) and fires what is due there. The real-time budget is looked at between passes, so a
/// task that never ends — timers that keep coming, or work that posts itself — is stopped.
struct VirtualTaskDrive: Sendable {
  /// Why a drive stopped.
  enum Stop {
    /// The task has ended: its result is in its `VirtualTaskOutcome`.
    case ended
    /// Nothing ready and no timer ahead: only another thread can bring something.
    case waitsForOtherThreads
    /// A `Task.sleep`'s way back is away on Swift's global executor: the clock holds for it.
    case resumptionAway
    /// The call's real-time budget ran out.
    case ranTooLong
  }

  /// How long a resumption that left for Swift's global executor may take to come back before
  /// `runTask` moves the clock anyway (it may never come: see `forgetResumptionsAway`).
  static var resumptionGrace: Duration { .seconds(1) }

  let virtual: VirtualLoop
  let mode: Loop.Mode
  /// When the call's real-time budget runs out.
  let giveUp: LoopClock.Instant
  /// The async `runTask`'s reservation of the loop, passed to each of its drives.
  let token: UInt64?
  /// Set when the task has ended. Not generic, unlike the outcome: the drive reads it between
  /// every two passes, and code generic over the task's result type that runs unspecialized
  /// (`runTask` is called from other modules) looks its type metadata up at each read.
  let ended: VirtualTaskEnd
  let task: Task<Void, Never>

  /// Checks the call, then starts `body` as a task preferring the loop's executor that leaves
  /// its result in `outcome`; its first job waits in the loop's queue until the loop is driven.
  init<Success: Sendable>(
    _ virtual: VirtualLoop, mode: Loop.Mode, runningAtMost budget: Duration, token: UInt64?,
    outcome: VirtualTaskOutcome<Success>,
    _ body: sending @escaping () async throws -> Success
  ) {
    Self.requireTaskMode(mode, on: virtual)
    self.virtual = virtual
    self.mode = mode
    self.token = token
    giveUp = LoopClock.Instant.now.advanced(by: budget)
    ended = outcome.end
    task = Task(executorPreference: virtual.loop.executor) {
      do {
        outcome.finish(.success(try await body()))
      } catch {
        outcome.finish(.failure(error))
      }
    }
  }

  /// Drives until the task has ended, nothing can happen without another thread, or the
  /// budget (or `end`) has run out.
  ///
  /// With work at hand (a job of the task, a block, a signalled source) a pass runs at the
  /// virtual now; with none, a pass whose wait moves the clock to the mode's next timer and
  /// fires it — one pass per sleep of the task, plus the one that runs the task on. The
  /// clock never moves while work is at hand, nor once the task has ended, nor while a
  /// `Task.sleep`'s way back is away.
  func drive(until end: LoopClock.Instant? = nil) -> Stop {
    let (loop, clock, mode) = (virtual.loop, virtual.virtualClock, self.mode)
    let end = end ?? giveUp
    return clock.driving(loop, token: token) {
      while true {
        if ended.happened { return .ended }
        if LoopClock.Instant.now >= end { return .ranTooLong }
        let (now, work) = (clock.now, loop.workDone)
        if !loop.hasReadyWork(in: mode), !clock.hasResumptionsAway,
          let next = loop.virtualWakeDeadline(in: mode), next > now
        {
          _ = clock.driving(loop, horizon: next) {
            loop.runMode(mode, until: next, returnAfterSourceHandled: false, onePass: true)
          }
          // A pass that a callout stopped before it did anything (an entry observer that
          // stops every run) cannot get there: time passes all the same, as in `advance`.
          if clock.now == now && loop.workDone == work { clock.move(to: next) }
          continue
        }
        _ = clock.driving(loop, horizon: now) {
          loop.runMode(mode, until: now, returnAfterSourceHandled: false, onePass: true)
        }
        if loop.workDone != work || loop.hasReadyWork(in: mode) { continue }
        if ended.happened { return .ended }
        return clock.hasResumptionsAway ? .resumptionAway : .waitsForOtherThreads
      }
    }
  }

  /// Whether another thread brought the loop something since the last pass (a look, no wait).
  func look() -> Bool {
    virtual.virtualClock.driving(virtual.loop, token: token) {
      virtual.loop.waitForOutsideWork(in: mode, until: .now)
    }
  }

  /// The async `runTask`'s wait between looks: 100 µs suspended; once the caller is cancelled
  /// (its sleeps end at once), 100 µs blocked on the loop's epoll set, then a yield.
  func pause() async {
    if !Task.isCancelled {
      try? await Task.sleep(for: .microseconds(100))
      if !Task.isCancelled { return }
    }
    _ = virtual.virtualClock.driving(virtual.loop, token: token) {
      virtual.loop.waitForOutsideWork(
        in: mode, until: LoopClock.Instant.now.advanced(by: .microseconds(100)))
    }
    await Task.yield()
  }

  /// Cancels the task and lets the cancellation run, blocking: the drive goes on (the clock
  /// moving, for a task that ends only when a timeout of its own fires) and other threads are
  /// waited for, for up to `resumptionGrace` of real time (a job of the task that came after
  /// the `VirtualLoop` is released would trap). Then makes the error.
  func stall(_ reason: VirtualLoop.TaskStalled.Reason) -> VirtualLoop.TaskStalled {
    let end = cancelForStall()
    while true {
      switch drive(until: end) {
      case .ended, .ranTooLong: return stalled(reason)
      case .waitsForOtherThreads, .resumptionAway:
        let came = virtual.virtualClock.driving(virtual.loop, token: token) {
          virtual.loop.waitForOutsideWork(in: mode, until: end)
        }
        if !came { return stalled(reason) }
      }
    }
  }

  /// `stall` for the async `runTask`: suspends between looks instead of blocking.
  func stallSuspending(_ reason: VirtualLoop.TaskStalled.Reason) async -> VirtualLoop.TaskStalled {
    let end = cancelForStall()
    while true {
      switch drive(until: end) {
      case .ended, .ranTooLong: return stalled(reason)
      case .waitsForOtherThreads, .resumptionAway:
        if look() { continue }
        if LoopClock.Instant.now >= end { return stalled(reason) }
        await pause()
      }
    }
  }

  /// Cancels the task; a `Task.sleep` it was in resumes with the cancellation, not through its
  /// timer, so a count of resumptions away is dropped. Returns when the grace ends.
  private func cancelForStall() -> LoopClock.Instant {
    task.cancel()
    virtual.virtualClock.forgetResumptionsAway()
    return LoopClock.Instant.now.advanced(by: Self.resumptionGrace)
  }

  private func stalled(_ reason: VirtualLoop.TaskStalled.Reason) -> VirtualLoop.TaskStalled {
    let now = virtual.now
    return VirtualLoop.TaskStalled(
      reason: reason, at: now, elapsed: virtual.virtualClock.start.duration(to: now), mode: mode,
      ended: ended.happened)
  }

  /// `runTask`'s entry checks: a mode the task's jobs can run in, and not from code the loop
  /// is running as a job (the task's first job would wait for that one to return).
  private static func requireTaskMode(_ mode: Loop.Mode, on virtual: VirtualLoop) {
    Loop.requireRunnable(mode, for: "VirtualLoop.runTask")
    if virtual.virtualClock.isDrivenByCurrentThread && virtual.loop.isRunningJob {
      fatalError(
        "RunLoopKit: VirtualLoop.runTask was called from a task or actor running on this "
          + "virtual loop (inside runTask's own task, say): the new task would wait for this "
          + "one to return, which waits for it. Await the work directly instead.")
    }
    if !virtual.loop.isCommonMode(mode) {
      fatalError(
        "RunLoopKit: VirtualLoop.runTask(in: \"\(mode)\") names a mode that is not one of the "
          + "loop's common modes: the task's jobs and loop.sleep's timers are queued for the "
          + "common modes and would never run there. Run .default, or add the mode with "
          + "loop.addCommonMode first.")
    }
  }
}
