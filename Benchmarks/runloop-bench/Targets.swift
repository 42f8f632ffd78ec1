/// The benchmark issue's targets, checked against one run's figures (ratios within the run).
enum Targets {
  static func check(_ report: Report) -> [TargetCheck] {
    var checks: [TargetCheck] = []
    func wake(_ name: String) -> Distribution? {
      report.wake.first { $0.name.hasPrefix(name) }?.distribution
    }
    let floors = report.wake.filter { $0.name.hasPrefix("C eventfd") }.map(\.distribution)
    if let ours = wake("Loop.perform"), let floor = floors.min(by: { $0.p50 < $1.p50 }),
      let cf = wake("CFRunLoop"), let dispatch = wake("DispatchQueue")
    {
      let ratio = Double(ours.p50) / Double(floor.p50)
      checks.append(
        TargetCheck(
          target: "Loop.perform wake p50 ≤ 1.2 × C eventfd+epoll p50",
          measured:
            "\(formatNanoseconds(ours.p50)) vs \(formatNanoseconds(floor.p50)) = \(fixed(ratio, 2))×",
          met: ratio <= 1.2))
      checks.append(
        TargetCheck(
          target: "Loop.perform wake p50 below CFRunLoop's and DispatchQueue's",
          measured:
            "\(formatNanoseconds(ours.p50)) vs CF \(formatNanoseconds(cf.p50)), Dispatch \(formatNanoseconds(dispatch.p50))",
          met: ours.p50 < cf.p50 && ours.p50 < dispatch.p50))
    }
    func rate(_ name: String, _ posters: Int) -> ThroughputResult? {
      report.throughput.first { $0.name.hasPrefix(name) && $0.posters == posters }
    }
    if let ours = rate("Loop.perform", 1), let dispatch = rate("DispatchQueue", 1),
      let cf = rate("CFRunLoop", 1)
    {
      let versusDispatch = ours.tasksPerSecond / dispatch.tasksPerSecond
      let versusCF = ours.tasksPerSecond / cf.tasksPerSecond
      checks.append(
        TargetCheck(
          target: "1-poster throughput ≥ 3 × serial DispatchQueue",
          measured: "\(fixed(versusDispatch, 2))×", met: versusDispatch >= 3))
      checks.append(
        TargetCheck(
          target: "1-poster throughput ≥ 5 × CFRunLoop (perform + wake)",
          measured: "\(fixed(versusCF, 2))×", met: versusCF >= 5))
      if let writes = ours.eventfdWritesPerTask {
        checks.append(
          TargetCheck(
            target: "< 0.1 eventfd writes per task when posting in a tight loop",
            measured: fixed(writes, 4), met: writes < 0.1))
      }
    }
    if let idle = report.idle.first(where: { $0.name.hasPrefix("idle resident") }) {
      checks.append(
        TargetCheck(
          target: "idle resident thread < 0.5 % of a core",
          measured: "\(fixed(idle.cpuPercent, 3)) %", met: idle.cpuPercent < 0.5))
    }
    let bursty = report.spin.filter { $0.pattern == "bursty" }
    if let spin10 = bursty.first(where: { $0.policy == "spin 10 µs then sleep" }),
      let busy = bursty.first(where: { $0.policy == "busy-wait" })
    {
      let latency = Double(spin10.distribution.p50) / Double(busy.distribution.p50)
      let cpu = spin10.cpuPercent / busy.cpuPercent
      checks.append(
        TargetCheck(
          target: "bursty, 10 µs spin: p50 within 3 × busy-wait p50",
          measured:
            "\(formatNanoseconds(spin10.distribution.p50)) vs \(formatNanoseconds(busy.distribution.p50)) = \(fixed(latency, 2))×",
          met: latency <= 3))
      checks.append(
        TargetCheck(
          target: "bursty, 10 µs spin: under 10 % of busy-wait's CPU",
          measured:
            "\(fixed(spin10.cpuPercent, 1)) % vs \(fixed(busy.cpuPercent, 1)) % = \(fixed(100 * cpu, 1)) %",
          met: cpu < 0.1))
    }
    if let timers = report.timerScale, timers.timers >= 1_000_000 {
      let total = timers.addSeconds + timers.cancelSeconds
      checks.append(
        TargetCheck(
          target: "1 000 000 timers: add + cancel under 1.5 s",
          measured:
            "\(fixed(timers.addSeconds, 3)) s + \(fixed(timers.cancelSeconds, 3)) s = \(fixed(total, 3)) s",
          met: total < 1.5))
    }
    return checks
  }
}
