/// Issue 29's targets: timers at the kernel's floor in both wait modes, tolerance that costs no
/// more than itself and coalesces, sleeps that stay off the global executor, and no allocation
/// per executor job.
enum TimerTargets {
  static func lateness(_ report: Report) -> [TargetCheck] {
    func row(_ name: String) -> LatenessResult? { report.timerLateness.first { $0.name == name } }
    guard let floor = row(TimerLatenessStudy.floorName) else { return [] }
    var checks: [TargetCheck] = []
    for name in [TimerLatenessStudy.futexName, TimerLatenessStudy.epollName] {
      guard let ours = row(name) else { continue }
      for (label, figure, bound) in [
        ("p50", ours.distribution.p50, floor.distribution.p50),
        ("p99", ours.distribution.p99, floor.distribution.p99),
      ] {
        let ratio = Double(figure) / Double(bound)
        checks.append(
          TargetCheck(
            target: "\(name) (1 ms) lateness \(label) vs C timerfd",
            figure: "\(formatNanoseconds(figure)) = \(fixed(ratio, 2))×",
            bound: "≤ 1.10×", met: ratio <= 1.1,
            why: "a timer should fire when the kernel's own timer does, whatever the loop sleeps on"
          ))
      }
    }
    if let tolerant = row(TimerLatenessStudy.tolerantName) {
      let limit = 1_000_000 + floor.distribution.p99
      checks.append(
        TargetCheck(
          target: "tolerance 1 ms: lateness p99 vs 1 ms + the floor's p99",
          figure: "\(formatNanoseconds(tolerant.distribution.p99))",
          bound: "≤ \(formatNanoseconds(limit))", met: tolerant.distribution.p99 <= limit,
          why: "a tolerance lets a timer be late by that much, and by no more"))
    }
    if let coalesced = row(TimerLatenessStudy.coalescedName),
      let separate = row(TimerLatenessStudy.uncoalescedName),
      let together = coalesced.wakeUpsPerFiring, let apart = separate.wakeUpsPerFiring
    {
      checks.append(
        TargetCheck(
          target: "4 timers within 1 ms tolerance: wake-ups per firing of all 4",
          figure: "\(fixed(together, 2)) (\(fixed(apart, 2)) with none)", bound: "≤ 1.10",
          met: together <= 1.1,
          why: "timers whose windows overlap share one wake-up"))
    }
    return checks
  }

  static func sleeps(_ report: Report) -> [TargetCheck] {
    var checks: [TargetCheck] = []
    // The floor measured in the same rounds as the sleeps.
    let floor = report.sleepLateness.first { $0.name == TimerLatenessStudy.floorName }
    for name in ["loop.sleep, loop executor", "loop.sleep, pinned actor"] {
      guard let row = report.sleepLateness.first(where: { $0.name == name }) else { continue }
      if let jobs = row.globalJobsPerSleep {
        checks.append(
          TargetCheck(
            target: "\(name): global jobs per sleep", figure: fixed(jobs, 2), bound: "0",
            met: jobs == 0,
            why: "a sleep on a loop resumes on the loop, with no detour through Dispatch"))
      }
      if let floor {
        let ratio = Double(row.distribution.p50) / Double(floor.distribution.p50)
        checks.append(
          TargetCheck(
            target: "\(name): lateness p50 vs C timerfd",
            figure: "\(formatNanoseconds(row.distribution.p50)) = \(fixed(ratio, 2))×",
            bound: "≤ 1.10×", met: ratio <= 1.1,
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
