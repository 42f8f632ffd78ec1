/// Issue 29's targets: timers at the kernel's floor in both wait modes, tolerance that costs no
/// more than itself and coalesces, sleeps that stay off the global executor, and no allocation
/// per executor job.
enum TimerTargets {
  static func lateness(_ report: Report) -> [TargetCheck] {
    var checks: [TargetCheck] = []
    // Each ratio is the median over rounds of the case over a batch of its floor measured
    // right before it; the tolerance row's lateness counts beyond its 1 ms, against a floor
    // that sleeps as long as it does (2 ms).
    for name in [
      TimerLatenessStudy.futexName, TimerLatenessStudy.epollName, TimerLatenessStudy.tolerantName,
    ] {
      guard let row = report.timerLateness.first(where: { $0.name == name }) else { continue }
      let what = name == TimerLatenessStudy.tolerantName ? "lateness − 1 ms" : "lateness"
      for (label, ratio) in [("p50", row.floorRatioP50), ("p99", row.floorRatioP99)] {
        guard let ratio else { continue }
        checks.append(
          TargetCheck(
            target: "\(name): \(what) \(label) vs C timerfd",
            figure: "\(fixed(ratio, 2))× floor", bound: "≤ 1.10× floor", met: ratio <= 1.1,
            why: name == TimerLatenessStudy.tolerantName
              ? "a tolerance lets a timer be late by that much, and by no more"
              : "a timer should fire when the kernel's own timer does, whatever the loop sleeps on"
          ))
      }
    }
    func row(_ name: String) -> LatenessResult? { report.timerLateness.first { $0.name == name } }
    if let coalesced = row(TimerLatenessStudy.coalescedName),
      let separate = row(TimerLatenessStudy.uncoalescedName),
      let together = coalesced.wakeUpsPerFiring, let apart = separate.wakeUpsPerFiring
    {
      checks.append(
        TargetCheck(
          target: "4 timers, tolerance 1 ms: wake-ups per firing of all 4",
          figure: "\(fixed(together, 2)) (\(fixed(apart, 2)) with none)", bound: "≤ 1.10",
          met: together <= 1.1,
          why: "timers whose windows overlap share one wake-up"))
    }
    return checks
  }

  static func sleeps(_ report: Report) -> [TargetCheck] {
    var checks: [TargetCheck] = []
    for name in ["loop.sleep, loop executor", "loop.sleep, pinned actor"] {
      guard let row = report.sleepLateness.first(where: { $0.name == name }) else { continue }
      if let jobs = row.globalJobsPerSleep {
        checks.append(
          TargetCheck(
            target: "\(name): global jobs per sleep", figure: fixed(jobs, 2), bound: "0",
            met: jobs == 0,
            why: "a sleep on a loop resumes on the loop, with no detour through Dispatch"))
      }
      if let ratio = row.floorRatioP50 {
        checks.append(
          TargetCheck(
            target: "\(name): lateness p50 vs C timerfd",
            figure: "\(fixed(ratio, 2))× floor", bound: "≤ 1.10× floor", met: ratio <= 1.1,
            why: "resuming a task should add nothing measurable to the timer under it"))
      }
    }
    return checks
  }

  static func allocations(_ report: Report) -> [TargetCheck] {
    var checks: [TargetCheck] = []
    if let job = report.allocations.first(where: { $0.name.hasPrefix("executor job") }) {
      // Task.yield itself makes one: the runtime allocates a continuation job per yield.
      let ours = job.allocationsPerOperation - 1
      checks.append(
        TargetCheck(
          target: "allocations per executor job (beyond the runtime's yield job)",
          figure: fixed(ours, 2), bound: "0", met: ours < 0.005,
          why: "queuing a job is the hot path of every actor hop onto a loop"))
    }
    if let sleep = report.allocations.first(where: { $0.name.hasPrefix("loop.sleep") }) {
      checks.append(
        TargetCheck(
          target: "allocations per loop.sleep", figure: fixed(sleep.allocationsPerOperation, 2),
          bound: "≤ 3", met: sleep.allocationsPerOperation <= 3.005,
          why: "the timer, its sleep's state and the guard that outlives a torn-down loop"))
    }
    if let split = report.executorSplit {
      checks.append(
        TargetCheck(
          target: "one executor object (Serial + Task) vs Serial only",
          figure: "\(fixed(split.ratio, 2))×", bound: "≤ 1.10×", met: split.ratio <= 1.1,
          why: "LoopExecutor stays one object only while the double conformance costs nothing"))
    }
    return checks
  }
}
