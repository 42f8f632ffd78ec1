import CBenchBaselines
import RunLoopKit
import RunLoopKitExecutors
import RunLoopKitProbes

/// An actor whose jobs all run on a resident thread's loop.
private actor PinnedSleeper {
  let thread: ResidentThread
  nonisolated var unownedExecutor: UnownedSerialExecutor {
    thread.executor.asUnownedSerialExecutor()
  }
  init(thread: ResidentThread) { self.thread = thread }

  func lateness(samples: Int, loopSleep: Bool) async -> ([Int64], Int) {
    await SleepLatenessStudy.lateness(samples: samples, loop: loopSleep ? thread.loop : nil)
  }
}

/// How late a sleep 1 ms ahead resumes, and how many jobs it puts on Swift's global executor:
/// `Task.sleep` (RunLoopKitExecutors times it with the loop's timer when the task prefers the
/// loop's executor) and `loop.sleep`, from a task preferring the loop's executor and from an
/// actor pinned to it, and `Task.sleep` on the default executor (Dispatch's timer), each right
/// after a batch of the C floor of `TimerLatenessStudy` (a timerfd on a 1 ms grid). The cases
/// run in alternating rounds so drift on a shared machine falls on all of them; lateness runs
/// from the deadline to the first instruction after the sleep.
enum SleepLatenessStudy {
  static func run(_ options: Options, progress: Progress) async throws -> [LatenessResult] {
    let rounds = 10
    let perRound = max(1, options.timerFires / rounds)
    let thread = try ResidentThread(name: "bench-sleep")
    try thread.performAndWait { _ = crb_set_timer_slack(TimerLatenessStudy.defaultSlack) }
    let actor = PinnedSleeper(thread: thread)
    let loopSlack = "50 µs at start; the loop sets 1 ns"
    let floorThread = try ResidentThread(name: "bench-sleepfl")
    defer {
      floorThread.stop()
      try? floorThread.join()
    }
    let cases: [(name: String, slack: String, measure: () async -> ([Int64], Int))] = [
      (
        "Task.sleep, loop executor", loopSlack,
        { await preferring(thread.executor) { await lateness(samples: perRound, loop: nil) } }
      ),
      (
        "Task.sleep, pinned actor", "Dispatch's timer thread",
        { await actor.lateness(samples: perRound, loopSleep: false) }
      ),
      (
        "Task.sleep, default executor", "Dispatch's timer thread",
        { await preferring(nil) { await lateness(samples: perRound, loop: nil) } }
      ),
      (
        "loop.sleep, loop executor", loopSlack,
        {
          await preferring(thread.executor) {
            await lateness(samples: perRound, loop: thread.loop)
          }
        }
      ),
      (
        "loop.sleep, pinned actor", loopSlack,
        { await actor.lateness(samples: perRound, loopSleep: true) }
      ),
    ]
    // Every case is measured right after a batch of the C floor and compared with it round
    // by round (the ratio is the median over rounds), as the wake study does.
    var samples = [[Int64]](repeating: [], count: cases.count)
    var floorSamples: [Int64] = []
    var ratios = [[Double]](repeating: [], count: cases.count)
    var globalJobs = [Int](repeating: 0, count: cases.count)
    for round in 0..<rounds {
      for offset in 0..<cases.count {
        let index = (round + offset) % cases.count
        let floor = try TimerLatenessStudy.cFloor(on: floorThread, perRound, futex: false)
        _ = GlobalJobCounter.watch(threadID: nil)
        let (batch, jobs) = await cases[index].measure()
        _ = GlobalJobCounter.stop()
        floorSamples += floor
        samples[index] += batch
        globalJobs[index] += jobs
        ratios[index].append(Double(Distribution(batch).p50) / Double(Distribution(floor).p50))
      }
    }
    thread.stop()
    try thread.join()
    progress.note("sleep lateness")
    let floorRow = LatenessResult(
      name: TimerLatenessStudy.floorName, distribution: Distribution(floorSamples),
      slack: "50 µs (a timerfd ignores slack)")
    return [floorRow]
      + cases.indices.map { index in
        var result = LatenessResult(
          name: cases[index].name, distribution: Distribution(samples[index]),
          slack: cases[index].slack)
        // Every thread counts (nothing else runs in the process meanwhile), from the first
        // sleep of a batch to its last, inside the caller's isolation.
        result.globalJobsPerSleep = Double(globalJobs[index]) / Double(samples[index].count)
        result.floorRatioP50 = medianOf(ratios[index])
        return result
      }
  }

  /// Nonisolated, so the preference decides where the sleeps and the timing run.
  private static func preferring(
    _ executor: LoopExecutor?, _ body: () async -> ([Int64], Int)
  ) async -> ([Int64], Int) {
    await withTaskExecutorPreference(executor) { await body() }
  }

  /// `samples` sleeps 1 ms ahead: `loop.sleep(until:)` on `loop`, or `Task.sleep(until:)`.
  /// `nonisolated(nonsending)`: it runs where its caller runs (the pinned actor, or the task
  /// under its preference), not on the global executor.
  /// Returns the lateness of each, and the global jobs counted from the first to the last.
  nonisolated(nonsending) static func lateness(
    samples: Int, loop: Loop?
  ) async -> ([Int64], Int) {
    var lateness: [Int64] = []
    let jobsBefore = GlobalJobCounter.count
    lateness.reserveCapacity(samples)
    for _ in 0..<samples {
      let late: Duration
      if let loop {
        let deadline = LoopClock.Instant.now.advanced(by: .milliseconds(1))
        try? await loop.sleep(until: deadline)
        late = deadline.duration(to: .now)
      } else {
        let deadline = ContinuousClock.now.advanced(by: .milliseconds(1))
        try? await Task.sleep(until: deadline, clock: .continuous)
        late = deadline.duration(to: .now)
      }
      let (seconds, attoseconds) = late.components
      lateness.append(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
    return (lateness, GlobalJobCounter.count - jobsBefore)
  }
}
