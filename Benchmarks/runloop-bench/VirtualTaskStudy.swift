import RunLoopKit

/// How fast a task's sleeps run in virtual time: 10 000 `loop.sleep`s of 8.64 s, one simulated
/// day, in one `VirtualLoop.runTask`, which moves the clock to each sleep's end as soon as
/// nothing else is ready. The peer is the same task on a thread's loop sleeping 10 000 times
/// for zero (each sleep a timer due at once, resumed on the next pass): the sleeping without
/// the clock, so the ratio is what stepping the clock costs a task.
struct VirtualTaskResult: Codable {
  let sleeps: Int
  let simulatedSeconds: Double
  let rounds: [VirtualTaskRound]
  /// Medians over the rounds.
  let wallSeconds: Double
  let wallMillisecondsPerSimulatedHour: Double
  let virtualNanosecondsPerSleep: Double
  let zeroNanosecondsPerSleep: Double
}

/// One round: the two back to back, in an order that alternates between rounds.
struct VirtualTaskRound: Codable {
  let wallSeconds: Double
  let virtualNanosecondsPerSleep: Double
  let zeroNanosecondsPerSleep: Double
  let virtualFirst: Bool
}

enum VirtualTaskStudy {
  static let sleeps = 10_000
  static let day = Duration.seconds(86_400)

  static func run(_ options: Options, progress: Progress) async throws -> VirtualTaskResult {
    progress.note("virtual time: a task's \(sleeps) loop.sleeps over one simulated day")
    let thread = try ResidentThread(name: "bench-vtask")
    _ = try simulateDay()  // untimed: warms the allocator and the code
    var rounds: [VirtualTaskRound] = []
    for round in 0..<(options.quick ? 3 : 7) {
      let virtualFirst = round % 2 == 0
      var virtualWall = 0.0
      var zero = 0.0
      for side in virtualFirst ? [true, false] : [false, true] {
        if side {
          virtualWall = try simulateDay()
        } else {
          zero = try await sleepZero(on: thread)
        }
      }
      rounds.append(
        VirtualTaskRound(
          wallSeconds: virtualWall,
          virtualNanosecondsPerSleep: virtualWall * 1e9 / Double(sleeps),
          zeroNanosecondsPerSleep: zero * 1e9 / Double(sleeps), virtualFirst: virtualFirst))
    }
    thread.stop()
    try thread.join()
    let wall = medianOf(rounds.map(\.wallSeconds))
    return VirtualTaskResult(
      sleeps: sleeps, simulatedSeconds: 86_400, rounds: rounds, wallSeconds: wall,
      wallMillisecondsPerSimulatedHour: wall * 1000 / 24,
      virtualNanosecondsPerSleep: medianOf(rounds.map(\.virtualNanosecondsPerSleep)),
      zeroNanosecondsPerSleep: medianOf(rounds.map(\.zeroNanosecondsPerSleep)))
  }

  /// One `runTask` whose task sleeps `sleeps` times through a simulated day. Wall seconds.
  private static func simulateDay() throws -> Double {
    let virtual = VirtualLoop()
    let each = day / sleeps
    let start = LoopClock.Instant.now
    let slept = try virtual.runTask { () -> Int in
      let loop = Loop.current
      for _ in 0..<sleeps { try await loop.sleep(for: each) }
      return sleeps
    }
    let wall = start.duration(to: .now)
    precondition(slept == sleeps && virtual.now == VirtualLoop.defaultStart.advanced(by: day))
    return seconds(wall)
  }

  /// The same task on a thread's loop, each sleep zero long. Wall seconds.
  private static func sleepZero(on thread: ResidentThread) async throws -> Double {
    let loop = thread.loop
    return try await Task(executorPreference: thread.executor) { () throws -> Double in
      let start = LoopClock.Instant.now
      for _ in 0..<sleeps { try await loop.sleep(for: .zero) }
      return seconds(start.duration(to: .now))
    }.value
  }

  private static func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
  }
}

extension Report {
  func printVirtualTasks() {
    guard let virtualTasks else { return }
    print(
      "\nVirtual time for a task: \(virtualTasks.sleeps) loop.sleeps of 8.64 s, one simulated "
        + "day, in one VirtualLoop.runTask")
    print(
      "(zero = the same task on a thread's loop sleeping for zero each time; ratio = virtual / "
        + "zero)\n")
    print(
      pad("round", 12) + pad("wall", 10, right: true) + pad("per sim h", 11, right: true)
        + pad("virtual", 10, right: true) + pad("zero", 10, right: true)
        + pad("ratio", 8, right: true))
    let median = VirtualTaskRound(
      wallSeconds: virtualTasks.wallSeconds,
      virtualNanosecondsPerSleep: virtualTasks.virtualNanosecondsPerSleep,
      zeroNanosecondsPerSleep: virtualTasks.zeroNanosecondsPerSleep, virtualFirst: true)
    let rows = virtualTasks.rounds.enumerated().map { index, round in
      ("\(index + 1)\(round.virtualFirst ? "" : " (z 1st)")", round)
    }
    for (name, round) in rows + [("median", median)] {
      print(
        pad(name, 12) + pad(fixed(round.wallSeconds * 1000, 1) + " ms", 10, right: true)
          + pad(fixed(round.wallSeconds * 1000 / 24, 2) + " ms", 11, right: true)
          + pad(formatNanoseconds(round.virtualNanosecondsPerSleep), 10, right: true)
          + pad(formatNanoseconds(round.zeroNanosecondsPerSleep), 10, right: true)
          + pad(
            fixed(round.virtualNanosecondsPerSleep / round.zeroNanosecondsPerSleep, 1) + "×", 8,
            right: true))
    }
    print(
      "\nA simulated day in \(fixed(virtualTasks.wallSeconds * 1000, 1)) ms (median): "
        + "\(fixed(virtualTasks.wallMillisecondsPerSimulatedHour, 2)) ms of real time per "
        + "simulated hour")
  }
}
