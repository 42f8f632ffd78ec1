import Glibc
import RunLoopKit

/// How fast a `VirtualLoop` runs simulated time: 10 000 one-shot timers at random instants in
/// one simulated hour, fired by `advance(by: 1 h)`, one pass of the real loop per fire date.
/// The peer is the same 10 000 timers on a thread's loop, all due at once, fired in one pass:
/// the firing work without the passes, so the ratio is what stepping the clock costs.
struct VirtualTimeResult: Codable {
  let timers: Int
  let simulatedSeconds: Double
  let rounds: [VirtualTimeRound]
  /// Medians over the rounds.
  let wallSeconds: Double
  let simulatedSecondsPerWallSecond: Double
  let virtualNanosecondsPerTimer: Double
  let batchNanosecondsPerTimer: Double
}

/// One round: the two back to back, in an order that alternates between rounds.
struct VirtualTimeRound: Codable {
  let wallSeconds: Double
  let virtualNanosecondsPerTimer: Double
  let batchNanosecondsPerTimer: Double
  let virtualFirst: Bool
}

enum VirtualTimeStudy {
  static let timers = 10_000
  static let hour = Duration.seconds(3600)

  static func run(_ options: Options, progress: Progress) throws -> VirtualTimeResult {
    progress.note("virtual time: \(timers) timers over one simulated hour")
    let thread = try ResidentThread(name: "bench-virtual")
    _ = try simulateHour(seed: 99)  // untimed: warms the allocator and the code
    var rounds: [VirtualTimeRound] = []
    for round in 0..<(options.quick ? 3 : 7) {
      let virtualFirst = round % 2 == 0
      var virtualWall = 0.0
      var batch = 0.0
      for side in virtualFirst ? [true, false] : [false, true] {
        if side {
          virtualWall = try simulateHour(seed: UInt64(round))
        } else {
          batch = try thread.performAndWait { try fireAllDue(on: thread.loop) }
        }
      }
      rounds.append(
        VirtualTimeRound(
          wallSeconds: virtualWall,
          virtualNanosecondsPerTimer: virtualWall * 1e9 / Double(timers),
          batchNanosecondsPerTimer: batch, virtualFirst: virtualFirst))
    }
    thread.stop()
    try thread.join()
    let wall = medianOf(rounds.map(\.wallSeconds))
    return VirtualTimeResult(
      timers: timers, simulatedSeconds: 3600, rounds: rounds, wallSeconds: wall,
      simulatedSecondsPerWallSecond: 3600 / wall,
      virtualNanosecondsPerTimer: medianOf(rounds.map(\.virtualNanosecondsPerTimer)),
      batchNanosecondsPerTimer: medianOf(rounds.map(\.batchNanosecondsPerTimer)))
  }

  /// Arms the timers on a fresh virtual loop (untimed), then times `advance(by: 1 h)`.
  /// Returns wall seconds.
  private static func simulateHour(seed: UInt64) throws -> Double {
    let virtual = VirtualLoop()
    var generator = SplitMix(seed: seed)
    var fired = 0
    let view = virtual.loop.assumeIsolated()
    for _ in 0..<timers {
      let offset = Int64(generator.next() % UInt64(hour.components.seconds * 1_000_000_000))
      try view.addTimer(fireAt: virtual.now.advanced(by: .nanoseconds(offset + 1))) { _ in
        fired += 1
      }
    }
    let start = LoopClock.Instant.now
    virtual.advance(by: hour)
    let wall = start.duration(to: .now)
    precondition(fired == timers, "the virtual hour fired \(fired) of \(timers) timers")
    return Double(wall.components.attoseconds) / 1e18 + Double(wall.components.seconds)
  }

  /// On the loop's thread: adds the timers with a fire date already past, then times the run
  /// that fires them all. Returns nanoseconds per timer.
  private static func fireAllDue(on loop: Loop) throws -> Double {
    var fired = 0
    let view = loop.assumeIsolated()
    let past = LoopClock.Instant.now.advanced(by: .seconds(-1))
    for _ in 0..<timers {
      try view.addTimer(fireAt: past) { _ in fired += 1 }
    }
    let start = LoopClock.Instant.now
    while fired < timers { loop.run(in: .default, for: .zero) }
    let wall = start.duration(to: .now)
    let nanoseconds =
      Double(wall.components.seconds) * 1e9 + Double(wall.components.attoseconds) / 1e9
    return nanoseconds / Double(timers)
  }

}

extension Report {
  func printVirtualTime() {
    guard let virtualTime else { return }
    print(
      "\nVirtual time: \(virtualTime.timers) one-shot timers at random instants in one "
        + "simulated hour, VirtualLoop.advance(by: 1 h)")
    print(
      "(batch = the same timers on a thread's loop, all due at once, fired in one pass;"
        + " ratio = virtual / batch)\n")
    print(
      pad("round", 12) + pad("wall", 10, right: true) + pad("sim s/s", 12, right: true)
        + pad("virtual", 10, right: true) + pad("batch", 10, right: true)
        + pad("ratio", 8, right: true))
    let median = VirtualTimeRound(
      wallSeconds: virtualTime.wallSeconds,
      virtualNanosecondsPerTimer: virtualTime.virtualNanosecondsPerTimer,
      batchNanosecondsPerTimer: virtualTime.batchNanosecondsPerTimer, virtualFirst: true)
    let rows = virtualTime.rounds.enumerated().map { index, round in
      ("\(index + 1)\(round.virtualFirst ? "" : " (b 1st)")", round)
    }
    for (name, round) in rows + [("median", median)] {
      print(
        pad(name, 12) + pad(fixed(round.wallSeconds * 1000, 1) + " ms", 10, right: true)
          + pad(fixed(3600 / round.wallSeconds, 0), 12, right: true)
          + pad(formatNanoseconds(round.virtualNanosecondsPerTimer), 10, right: true)
          + pad(formatNanoseconds(round.batchNanosecondsPerTimer), 10, right: true)
          + pad(
            fixed(round.virtualNanosecondsPerTimer / round.batchNanosecondsPerTimer, 1) + "×", 8,
            right: true))
    }
    print(
      "\n\(fixed(virtualTime.simulatedSecondsPerWallSecond, 0)) simulated seconds per wall "
        + "second (median): one simulated hour in \(fixed(virtualTime.wallSeconds * 1000, 1)) ms")
  }
}
