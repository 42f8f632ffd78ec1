/// The benchmark issue's targets, checked against one run's figures (ratios within the run).
///
/// Each check says what was measured, the bound, and in one line why the bound matters, so
/// the table reads as an explanation rather than a list of verdicts.
enum Targets {
  static func check(_ report: Report) -> [TargetCheck] {
    wakePaths(report) + wake(report) + throughput(report) + spin(report) + timers(report)
      + TimerTargets.lateness(report) + TimerTargets.sleeps(report)
      + TimerTargets.allocations(report) + isolated(report) + idle(report)
  }

  /// Every way of waking a loop, each checked against the floor in every placement.
  static let wakePathCases = [
    "Loop.perform", "ManualSource signal + wakeUp", WakeCases.performWithDescriptors,
    "DescriptorSource on an eventfd", "LoopPort.send",
  ]

  private static func wakePaths(_ report: Report) -> [TargetCheck] {
    var checks: [TargetCheck] = []
    for name in wakePathCases {
      guard let result = report.wake.first(where: { $0.name == name }) else { continue }
      for placement in [Placement.sameCPU, .crossCPU, .unpinned] {
        guard let f = result.figures(in: placement) else { continue }
        checks.append(
          TargetCheck(
            target: "\(name) wake p50, \(placement.rawValue)",
            figure: "\(fixed(f.p50RatioToFloor, 2))× floor",
            bound: "≤ 1.10× floor", met: f.p50RatioToFloor <= 1.1,
            why: "every way of waking a loop should cost what the kernel's own path costs"))
      }
    }
    return checks
  }

  private static func wake(_ report: Report) -> [TargetCheck] {
    var checks: [TargetCheck] = []
    func result(_ name: String) -> WakeResult? { report.wake.first { $0.name == name } }
    guard let ours = result("Loop.perform"), let dispatch = result("DispatchQueue.async (serial)")
    else { return [] }
    for placement in [Placement.sameCPU, .crossCPU] {
      guard let f = ours.figures(in: placement), let d = dispatch.figures(in: placement) else {
        continue
      }
      let place = placement.rawValue
      checks.append(
        TargetCheck(
          target: "Loop.perform wake p50 vs Dispatch, \(place)",
          figure: "\(formatNanoseconds(f.p50.median)) vs \(formatNanoseconds(d.p50.median))",
          bound: "≤ Dispatch", met: f.p50.median <= d.p50.median,
          why: "Dispatch is what a Swift user would reach for instead"))
      checks.append(
        TargetCheck(
          target: "Loop.perform wake p99, \(place)",
          figure: "\(fixed(f.p99RatioToFloor, 2))× floor",
          bound: "≤ 2× floor", met: f.p99RatioToFloor <= 2,
          why: "no hidden slow path (a lock handoff, a second wake) in the tail"))
    }
    return checks
  }

  private static func throughput(_ report: Report) -> [TargetCheck] {
    var checks: [TargetCheck] = []
    func rate(_ name: String, _ posters: Int) -> ThroughputResult? {
      report.throughput.first { $0.name == name && $0.posters == posters }
    }
    for posters in [1, 4] {
      guard let ours = rate("Loop.perform", posters),
        let floor = rate(ThroughputStudy.floorName, posters),
        let dispatch = rate("DispatchQueue.async (serial)", posters)
      else { continue }
      // Round by round when the rounds were kept (the peers share each round's drift).
      let versusFloor =
        ours.roundRatios.map { medianOf($0) } ?? ours.tasksPerSecond / floor.tasksPerSecond
      let versusDispatch = ours.tasksPerSecond / dispatch.tasksPerSecond
      checks.append(
        TargetCheck(
          target: "Loop.perform throughput, \(posters) poster\(posters == 1 ? "" : "s")",
          figure: "\(fixed(versusFloor, 2))× C posting floor", bound: "≥ 1.00×",
          met: versusFloor >= 1,
          why: "posting should cost what a mutex, a queue and an eventfd cost, no more"))
      if posters > 1, let lowest = ours.roundRatios?.first {
        checks.append(
          TargetCheck(
            target: "Loop.perform throughput, \(posters) posters, slowest round",
            figure: "\(fixed(lowest, 2))× C posting floor", bound: "≥ 0.90×", met: lowest >= 0.9,
            why: "a poster preempted while holding the lock must not stall the others"))
      }
      checks.append(
        TargetCheck(
          target:
            "Loop.perform throughput vs Dispatch, \(posters) poster\(posters == 1 ? "" : "s")",
          figure: "\(fixed(versusDispatch, 2))×", bound: "≥ 2×", met: versusDispatch >= 2,
          why: "a thread-affine loop must not be a slower queue than Dispatch"))
      if let writes = ours.wakeUpsPerTask {
        checks.append(
          TargetCheck(
            target: "wake-up syscalls per task, \(posters) poster\(posters == 1 ? "" : "s")",
            figure: fixed(writes, 4), bound: "< 0.1", met: writes < 0.1,
            why: "posts to a busy loop are coalesced: no syscall per task"))
      }
    }
    return checks
  }

  private static func spin(_ report: Report) -> [TargetCheck] {
    var checks: [TargetCheck] = []
    func row(_ placement: Placement, _ pattern: String, _ policy: String) -> SpinResult? {
      report.spin.first {
        $0.placement == placement && $0.pattern == pattern && $0.policy == policy
      }
    }
    for placement in [Placement.sameCPU, .crossCPU] {
      let place = placement.rawValue
      if let adaptive = row(placement, "bursty", "adaptive"),
        let busy = row(placement, "bursty", "busy-wait")
      {
        let ratio = Double(adaptive.distribution.p50) / Double(busy.distribution.p50)
        checks.append(
          TargetCheck(
            target: "adaptive, bursty: p50 vs busy-wait, \(place)",
            figure: "\(formatNanoseconds(adaptive.distribution.p50)) = \(fixed(ratio, 2))×",
            bound: "≤ 2×", met: ratio <= 2,
            why: "spinning through a burst should answer nearly as fast as never sleeping"))
        checks.append(
          TargetCheck(
            target: "adaptive, bursty: CPU, \(place)",
            figure: "\(fixed(adaptive.cpuPercent, 1)) % of a core", bound: "< 5 %",
            met: adaptive.cpuPercent < 5,
            why: "…for a small part of the core busy-waiting burns (posts fill ~5 % of the time)"))
      }
      if let adaptive = row(placement, "sparse", "adaptive"),
        let sleep = row(placement, "sparse", "sleep")
      {
        let latency = Double(adaptive.distribution.p50) / Double(sleep.distribution.p50)
        let cpu = adaptive.cpuPercent / sleep.cpuPercent
        checks.append(
          TargetCheck(
            target: "adaptive, sparse: p50 and CPU vs sleep, \(place)",
            figure: "\(fixed(latency, 2))× p50, \(fixed(cpu, 2))× CPU", bound: "≤ 1.10× each",
            met: latency <= 1.1 && cpu <= 1.1,
            why: "with posts too far apart to catch, it must cost what sleeping costs"))
      }
    }
    return checks
  }

  private static func timers(_ report: Report) -> [TargetCheck] {
    guard let timers = report.timerScale else { return [] }
    let count = timers.timers >= 1_000_000 ? "1 000 000" : "\(timers.timers) (quick)"
    return [
      TargetCheck(
        target: "timer add at \(count)",
        figure:
          "\(fixed(timers.addNanosecondsPerTimer, 0)) ns (C heap \(fixed(timers.cAddNanosecondsPerTimer, 0)) ns)",
        bound: "≤ 100 ns", met: timers.addNanosecondsPerTimer <= 100,
        why: "a timer per connection or request must be cheap to arm"),
      TargetCheck(
        target: "timer cancel at \(count)",
        figure:
          "\(fixed(timers.cancelNanosecondsPerTimer, 0)) ns (C heap \(fixed(timers.cCancelNanosecondsPerTimer, 0)) ns)",
        bound: "≤ 600 ns", met: timers.cancelNanosecondsPerTimer <= 600,
        why: "most such timers are cancelled before they fire"),
    ]
  }

  private static func isolated(_ report: Report) -> [TargetCheck] {
    guard let isolated = report.isolated else { return [] }
    let count = isolated.timers >= 1_000_000 ? "1 000 000" : "\(isolated.timers) (quick)"
    let perform = isolated.viewPerformNanoseconds / isolated.loopPerformNanoseconds
    let arm = isolated.viewArmNanosecondsPerTimer / isolated.cArmNanosecondsPerTimer
    return [
      TargetCheck(
        target: "view perform vs Loop.perform, own thread",
        figure:
          "\(fixed(perform, 2))× (\(fixed(isolated.viewPerformNanoseconds, 0)) vs \(fixed(isolated.loopPerformNanoseconds, 0)) ns)",
        bound: "≤ 1.00×", met: perform <= 1.0,
        why: "the view's checks must cost nothing where code on a loop posts"),
      TargetCheck(
        target: "view timer arm vs C make + insert at \(count)",
        figure:
          "\(fixed(arm, 2))× (\(fixed(isolated.viewArmNanosecondsPerTimer, 0)) vs C \(fixed(isolated.cArmNanosecondsPerTimer, 0)) ns)",
        bound: "≤ 1.00×", met: arm <= 1.0,
        why: "arming a timer from the loop's own thread should cost what C pays"),
    ]
  }

  private static func idle(_ report: Report) -> [TargetCheck] {
    guard let idle = report.idle.first(where: { $0.name.hasPrefix("idle resident") }) else {
      return []
    }
    return [
      TargetCheck(
        target: "idle resident thread CPU", figure: "\(fixed(idle.cpuPercent, 3)) % of a core",
        bound: "< 0.5 %", met: idle.cpuPercent < 0.5,
        why: "a thread kept alive must cost nothing while it waits")
    ]
  }
}

/// One of the issue's targets, checked against this run's figures.
struct TargetCheck: Codable {
  let target: String
  let figure: String
  let bound: String
  let met: Bool
  /// One line on why the bound matters.
  let why: String
}
