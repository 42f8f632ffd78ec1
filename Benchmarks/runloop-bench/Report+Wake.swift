extension Report {
  /// The wake tables: one per placement for the cases that wake a sleeping thread, then the
  /// rows that wake nothing.
  func printWakeTables() {
    guard let first = wake.first?.figures.first else { return }
    let rounds = first.pooled.count / max(1, wakeSamplesPerRound)
    print("\nWake latency: post → first instruction of the posted work on a thread that was asleep")
    print(
      """
      \(rounds) rounds × \(wakeSamplesPerRound) samples per case and placement, in a fresh random \
      order every round. p50 and p99: median over rounds (lowest–highest round after it).
      ×floor: this case's p50 (p99) over that of a batch of the C eventfd + epoll_wait floor \
      (\(wakeReferenceSamples) samples) taken right before it in the same placement, median \
      over rounds; the floor's own row is the floor over itself, the noise of the method. \
      The poster yields its CPU while it waits for each sample.
      """)
    let sleeping = wake.filter(\.wakesSleepingThread)
    for placement in Placement.allCases {
      guard sleeping.contains(where: { $0.figures(in: placement) != nil }) else { continue }
      print("\n\(placement.rawValue.capitalizedFirst): \(placement.explanation)\n")
      printWakeRows(sleeping, in: placement)
    }
    let others = wake.filter { !$0.wakesSleepingThread }
    guard !others.isEmpty else { return }
    print("\nHand-offs that wake no sleeping thread (a spinning consumer; an actor hop that runs")
    print("on the awaiting thread): not comparable with the rows above\n")
    for placement in Placement.allCases
    where others.contains(where: { $0.figures(in: placement) != nil }) {
      print("\(placement.rawValue.capitalizedFirst):")
      printWakeRows(others, in: placement)
    }
  }

  private func printWakeRows(_ results: [WakeResult], in placement: Placement) {
    print(
      pad("case", 40) + pad("p50", 9, right: true) + pad("(rounds)", 17, right: true)
        + pad("p99", 10, right: true) + pad("(rounds)", 17, right: true)
        + pad("p99.9", 10, right: true) + pad("×floor", 8, right: true)
        + pad("p99", 7, right: true))
    var notes: [String] = []
    for result in results {
      guard let f = result.figures(in: placement) else { continue }
      print(
        pad(result.name, 40) + pad(formatNanoseconds(f.p50.median), 9, right: true)
          + pad(range(f.p50), 17, right: true)
          + pad(formatNanoseconds(f.p99.median), 10, right: true)
          + pad(range(f.p99), 17, right: true)
          + pad(formatNanoseconds(f.pooled.p999), 10, right: true)
          + pad(fixed(f.p50RatioToFloor, 2), 8, right: true)
          + pad(fixed(f.p99RatioToFloor, 2), 7, right: true))
      if f.misplacedPercent >= 0.05 {
        notes.append(
          "\(result.name): \(fixed(f.misplacedPercent, 1)) % of samples ran off the placement's CPU"
        )
      }
      if result.wakesSleepingThread && f.onPosterThreadPercent >= 0.05 {
        notes.append(
          "\(result.name): \(fixed(f.onPosterThreadPercent, 1)) % ran on the poster's own thread")
      }
    }
    for note in notes { print("  note: \(note)") }
  }

  private func range(_ spread: Spread) -> String {
    "\(formatNanoseconds(spread.low))–\(formatNanoseconds(spread.high))"
  }
}

extension String {
  /// "same CPU" → "Same CPU".
  var capitalizedFirst: String { prefix(1).uppercased() + dropFirst() }
}
