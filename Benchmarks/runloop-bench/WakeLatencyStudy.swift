/// One wake case in one placement, over every round.
struct WakeFigures: Codable {
  let placement: Placement
  /// Median over rounds of each round's p50 and p99, with the lowest and highest round.
  let p50: Spread
  let p99: Spread
  /// Median over rounds of (this case's p50 / the p50 of the C eventfd floor's reference batch
  /// taken right before it, in the same placement); the same for p99. Drift on the machine
  /// falls on both sides of each ratio. The floor's own row is its batch over its reference:
  /// how far apart two runs of the same path come out, the noise of every other ratio.
  let p50RatioToFloor: Double
  let p99RatioToFloor: Double
  /// Every sample of every round, for p99.9, the maximum and the chart.
  let pooled: Distribution
  /// Samples whose work ran off the placement's CPU, and samples run on the poster's own
  /// thread (nothing was woken), in percent.
  let misplacedPercent: Double
  let onPosterThreadPercent: Double
}

/// A median with the range it was taken from.
struct Spread: Codable {
  let median: Int64
  let low: Int64
  let high: Int64

  init(_ values: [Int64]) {
    median = values.isEmpty ? 0 : medianOf(values)
    low = values.min() ?? 0
    high = values.max() ?? 0
  }
}

/// One wake case's result in every placement.
struct WakeResult: Codable {
  let name: String
  let wakesSleepingThread: Bool
  let figures: [WakeFigures]

  func figures(in placement: Placement) -> WakeFigures? {
    figures.first { $0.placement == placement }
  }
}

/// Wake latency of every peer in every placement, in interleaved rounds: each round takes a
/// batch of samples from every (case, placement) pair in a fresh random order, so drift on
/// this shared machine (other guests, frequency) falls on every case alike rather than on
/// whichever ran first or last.
enum WakeLatencyStudy {
  static let floorName = "C eventfd + epoll_wait (floor)"

  static func run(_ options: Options, progress: Progress) async throws -> [WakeResult] {
    let targets = try WakeTargets(samples: options.wakeSamples)
    let cases = targets.cases
    let placements = Placement.available
    // Warm up (CPU frequency, the VM's vCPU scheduling, page faults, Dispatch's worker pool)
    // before the first figure counts.
    for index in cases.indices {
      _ = try await cases[index].sample(placements[0], min(options.wakeSamples, 200), 1)
    }
    let floorIndex = cases.firstIndex { $0.name == floorName }!
    var batches = [[[WakeSamples]]](
      repeating: [[WakeSamples]](repeating: [], count: placements.count), count: cases.count)
    var references = batches
    var random = SplitMix(seed: 2026)
    for round in 0..<options.wakeRounds {
      var order = cases.indices.flatMap { c in placements.indices.map { (c, $0) } }
      order.shuffle(using: &random)
      for (c, p) in order {
        let seed = UInt64(round * 1_000 + c * 10 + p)
        // The floor again, right before the case: what the kernel's path costs on this machine
        // now. A round lasts ~25 s, over which a VM's wake-ups drift by tens of percent (the
        // host schedules the idle vCPU), more than the differences measured here.
        references[c][p].append(
          try await cases[floorIndex].sample(
            placements[p], options.wakeReferenceSamples, seed ^ 0x5EED))
        batches[c][p].append(try await cases[c].sample(placements[p], options.wakeSamples, seed))
      }
      progress.note("wake latency: round \(round + 1) of \(options.wakeRounds)")
    }
    try targets.close()

    return cases.indices.map { c in
      WakeResult(
        name: cases[c].name, wakesSleepingThread: cases[c].wakesSleepingThread,
        figures: placements.indices.map { p in
          figures(batches[c][p], floor: references[c][p], placement: placements[p])
        })
    }
  }

  private static func figures(
    _ rounds: [WakeSamples], floor: [WakeSamples], placement: Placement
  ) -> WakeFigures {
    let perRound = rounds.map { Distribution($0.values) }
    let floorRounds = floor.map { Distribution($0.values) }
    func ratio(_ value: (Distribution) -> Int64) -> Double {
      let ratios = zip(perRound, floorRounds).map { Double(value($0)) / Double(value($1)) }
      return medianOf(ratios)
    }
    let total = Double(rounds.reduce(0) { $0 + $1.values.count })
    return WakeFigures(
      placement: placement, p50: Spread(perRound.map(\.p50)), p99: Spread(perRound.map(\.p99)),
      p50RatioToFloor: ratio(\.p50), p99RatioToFloor: ratio(\.p99),
      pooled: Distribution(rounds.flatMap(\.values)),
      misplacedPercent: 100 * Double(rounds.reduce(0) { $0 + $1.misplaced }) / total,
      onPosterThreadPercent: 100 * Double(rounds.reduce(0) { $0 + $1.onPosterThread }) / total)
  }
}
