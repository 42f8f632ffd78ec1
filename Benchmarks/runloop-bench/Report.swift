import Foundation

/// Everything one run measured.
struct Report: Codable {
  var machine: String = ""
  var quick = false
  var wakeSamplesPerRound = 0
  var wakeReferenceSamples = 0
  var wake: [WakeResult] = []
  var spin: [SpinResult] = []
  var idle: [IdleResult] = []
  var throughput: [ThroughputResult] = []
  var groupThroughput: [GroupThroughputResult] = []
  var threads: ThreadCostResult?
  var timerScale: TimerScaleResult?
  var timerLateness: [LatenessResult] = []
  var sleepLateness: [LatenessResult] = []
  var allocations: [AllocationResult] = []
  var executorSplit: ExecutorSplitResult?
  var tracer: TracerCostResult?
  var isolated: IsolatedLoopResult?
  var threadStorage: ThreadStorageResult?
  var virtualTime: VirtualTimeResult?
  var virtualTasks: VirtualTaskResult?
  var scaling: ScalingResult?
  var targets: [TargetCheck] = []
}

/// Progress lines on stderr, so long runs show where they are without mixing into the table.
final class Progress: Sendable {
  let start = Date()
  func note(_ text: String) {
    let seconds = Int(Date().timeIntervalSince(start))
    FileHandle.standardError.write(Data("[\(seconds) s] \(text)\n".utf8))
  }
}

extension Report {
  func printTables() {
    printWakeTables()
    if !spin.isEmpty {
      print("\nSpin-then-sleep: latency versus the waiting thread's CPU (Loop.perform)")
      print(
        "sparse = posts 30–80 µs apart; bursty = bursts of 100 posts 5 µs apart, 10 ms silence")
      for placement in Placement.allCases where spin.contains(where: { $0.placement == placement })
      {
        print("\n\(placement.rawValue.capitalizedFirst): \(placement.explanation)\n")
        print(
          pad("pattern", 8) + pad("wait policy", 26) + pad("p50", 10, right: true)
            + pad("p90", 10, right: true) + pad("p99", 10, right: true)
            + pad("p99.9", 10, right: true) + pad("CPU", 9, right: true))
        for result in spin where result.placement == placement {
          let d = result.distribution
          print(
            pad(result.pattern, 8) + pad(result.policy, 26)
              + pad(formatNanoseconds(d.p50), 10, right: true)
              + pad(formatNanoseconds(d.p90), 10, right: true)
              + pad(formatNanoseconds(d.p99), 10, right: true)
              + pad(formatNanoseconds(d.p999), 10, right: true)
              + pad(fixed(result.cpuPercent, 1) + " %", 9, right: true))
        }
      }
    }
    if !idle.isEmpty {
      print("\nIdle CPU (per-thread kernel accounting)\n")
      for result in idle {
        print(
          pad(result.name, 36) + pad(fixed(result.cpuPercent, 3) + " % of a core", 22, right: true)
            + "  over \(fixed(result.seconds, 1)) s")
      }
    }
    if !throughput.isEmpty {
      print("\nThroughput: tasks posted as fast as possible, every one counted as run once")
      print("(median of interleaved rounds, slowest–fastest round after it; unpinned;")
      print(" ×floor: the rate over the C posting floor's in the same round, median and lowest)\n")
      print(
        pad("consumer", 42) + pad("posters", 8, right: true) + pad("tasks/s", 10, right: true)
          + pad("(rounds)", 18, right: true) + pad("wake-ups/task", 15, right: true)
          + pad("×floor", 8, right: true) + pad("lowest", 8, right: true))
      for result in throughput {
        print(
          pad(result.name, 42) + pad("\(result.posters)", 8, right: true)
            + pad(fixed(result.tasksPerSecond / 1e6, 2) + " M", 10, right: true)
            + pad(
              fixed(result.lowest / 1e6, 2) + "–" + fixed(result.highest / 1e6, 2) + " M", 18,
              right: true)
            + pad(result.wakeUpsPerTask.map { fixed($0, 4) } ?? "—", 15, right: true)
            + pad(result.roundRatios.map { fixed(medianOf($0), 2) } ?? "—", 8, right: true)
            + pad(result.roundRatios.map { fixed($0.first ?? 0, 2) } ?? "—", 8, right: true))
      }
    }
    printGroupThroughput()
    if let threads {
      print("\nWhy keep a thread alive\n")
      print(
        "create-to-entry of a new pthread   p50 \(formatNanoseconds(threads.createToEntry.p50)), p99 \(formatNanoseconds(threads.createToEntry.p99))"
      )
      print(
        "a fresh thread per task (create+join)  \(fixed(threads.freshThreadTasksPerSecond / 1e3, 1)) k tasks/s"
      )
      print(
        "posting to one resident thread         \(fixed(threads.residentTasksPerSecond / 1e3, 1)) k tasks/s"
      )
      if let latency = threads.residentPerTaskLatency {
        print(
          "resident thread per-task wake latency  p50 \(formatNanoseconds(latency.p50)), p99 \(formatNanoseconds(latency.p99))"
        )
      }
    }
    if let timerScale {
      print("\nTimer scale: \(timerScale.timers) timers in one mode, LoopTimer vs a C timer heap")
      print(
        "(per timer; C = a libuv-style intrusive binary heap, same work in the same process;\n"
          + " add = loop.add(timer, to:), cancel = timer.invalidate() in random order;"
          + " ratio = ours / C)\n")
      printPairedTable(
        (("add", "C add"), ("cancel", "C cancel")),
        rounds: timerScale.rounds.enumerated().map { index, round in
          (
            "\(index + 1)\(round.cFirst ? " (C 1st)" : "")",
            (round.addNanosecondsPerTimer, round.cAddNanosecondsPerTimer),
            (round.cancelNanosecondsPerTimer, round.cCancelNanosecondsPerTimer)
          )
        },
        median: (
          (timerScale.addNanosecondsPerTimer, timerScale.cAddNanosecondsPerTimer),
          (timerScale.cancelNanosecondsPerTimer, timerScale.cCancelNanosecondsPerTimer)
        ))
      print(
        "\nfire all    \(fixed(timerScale.fireAllSeconds, 3)) s  (\(timerScale.fired) fired, due within 10 ms)"
      )
    }
    printIsolatedLoop()
    printThreadStorage()
    printVirtualTime()
    printVirtualTasks()
    printLateness(
      timerLateness,
      title: "Lateness of a 1 ms repeating timer (first five rows: interleaved rounds, each case\n"
        + "right after a batch of its floor; ×floor: median over rounds of the case's p50 (p99),\n"
        + "less its tolerance, over the floor batch's)")
    printLateness(
      sleepLateness,
      title: "Lateness of a sleep until 1 ms ahead (rotating rounds, each case right after a\n"
        + "batch of the floor; ×floor: median over rounds of p50 over the floor batch's)")
    if !allocations.isEmpty {
      print("\nAllocations per operation (the C allocator, counted process-wide; task preferring")
      print("a resident thread's executor; after a warm-up)\n")
      print(
        pad("operation", 46) + pad("count", 10, right: true) + pad("allocations", 13, right: true)
          + pad("per op", 9, right: true) + pad("time/op", 10, right: true))
      for result in allocations {
        print(
          pad(result.name, 46) + pad("\(result.operations)", 10, right: true)
            + pad("\(result.allocations)", 13, right: true)
            + pad(fixed(result.allocationsPerOperation, 2), 9, right: true)
            + pad(formatNanoseconds(result.nanosecondsPerOperation), 10, right: true))
      }
    }
    if let split = executorSplit {
      print("\nOne executor object or two: two actors with their own executors on one loop calling")
      print("each other (each call two jobs on the same thread, no wake-up)")
      print("(\(split.calls) calls a round, median of alternating rounds)\n")
      print(
        "SerialExecutor + TaskExecutor   \(formatNanoseconds(split.bothNanosecondsPerCall)) per call"
      )
      print(
        "SerialExecutor only             \(formatNanoseconds(split.serialOnlyNanosecondsPerCall)) per call"
          + "  (ratio \(fixed(split.ratio, 2))×)")
    }
    if let tracer {
      print(
        "\nLoopTracer and stall watch cost: back-to-back passes, one manual source performed "
          + "per pass\n")
      let ratio = tracer.tracedNanosecondsPerPass / tracer.untracedNanosecondsPerPass
      print("neither              \(fixed(tracer.untracedNanosecondsPerPass, 0)) ns per pass")
      print(
        "tracer attached      \(fixed(tracer.tracedNanosecondsPerPass, 0)) ns per pass "
          + "(\(fixed(ratio, 2))×, \(fixed(tracer.eventsPerPass, 1)) events per pass)")
      let watchRatio = tracer.watchedNanosecondsPerPass / tracer.untracedNanosecondsPerPass
      print(
        "stall watch set      \(fixed(tracer.watchedNanosecondsPerPass, 0)) ns per pass "
          + "(\(fixed(watchRatio, 2))×: each callout published for the watch's thread)")
    }
    printScaling()
    printTargets()
  }

  func writeJSON(to path: String) throws {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    try encoder.encode(self).write(to: URL(fileURLWithPath: path))
  }
}

extension Report {
  /// One line per case: p50, p99 and max lateness. Prints nothing for an empty list.
  fileprivate func printLateness(_ results: [LatenessResult], title: String) {
    guard !results.isEmpty else { return }
    print("\n\(title)\n")
    let extra =
      results.contains { $0.wakeUpsPerFiring != nil } ? "wakes/firing" : "global jobs/sleep"
    print(
      pad("case", 40) + pad("p50", 10, right: true) + pad("p99", 10, right: true)
        + pad("max", 10, right: true) + pad("×floor", 8, right: true) + pad("p99", 6, right: true)
        + pad(extra, 19, right: true) + "  thread's timer slack")
    for result in results {
      let d = result.distribution
      let figure =
        result.wakeUpsPerFiring.map { fixed($0, 2) } ?? result.globalJobsPerSleep.map {
          fixed($0, 2)
        } ?? "—"
      print(
        pad(result.name, 40) + pad(formatNanoseconds(d.p50), 10, right: true)
          + pad(formatNanoseconds(d.p99), 10, right: true)
          + pad(formatNanoseconds(d.max), 10, right: true)
          + pad(result.floorRatioP50.map { fixed($0, 2) } ?? "—", 8, right: true)
          + pad(result.floorRatioP99.map { fixed($0, 2) } ?? "—", 6, right: true)
          + pad(figure, 19, right: true) + "  " + result.slack)
    }
  }
}

extension Report {
  /// The targets as a short table: what, the figure, the bound, met or not, and why.
  fileprivate func printTargets() {
    guard !targets.isEmpty else { return }
    let met = targets.filter(\.met).count
    print(
      "\nTargets: \(met) of \(targets.count) met in this run (figures are ratios within the run)\n")
    print(pad("target", 60) + pad("figure", 34) + pad("bound", 16) + "result")
    for check in targets {
      print(
        pad(check.target, 60) + pad(check.figure, 34) + pad(check.bound, 16)
          + (check.met ? "met" : "not met"))
      print("  why: \(check.why)")
    }
  }
}

/// A table of rounds that compares two pairs of figures, ours and a peer's (nanoseconds),
/// each followed by ours / peer's, and a last row of the medians.
func printPairedTable(
  _ headers: ((String, String), (String, String)),
  rounds: [(name: String, first: (Double, Double), second: (Double, Double))],
  median: ((Double, Double), (Double, Double))
) {
  print(
    pad("round", 12) + pad(headers.0.0, 10, right: true) + pad(headers.0.1, 10, right: true)
      + pad("ratio", 8, right: true) + pad(headers.1.0, 10, right: true)
      + pad(headers.1.1, 10, right: true) + pad("ratio", 8, right: true))
  for (name, first, second) in rounds + [("median", median.0, median.1)] {
    var line = pad(name, 12)
    for (ours, peer) in [first, second] {
      line +=
        pad(formatNanoseconds(ours), 10, right: true)
        + pad(formatNanoseconds(peer), 10, right: true)
        + pad(fixed(ours / peer, 2) + "×", 8, right: true)
    }
    print(line)
  }
}
