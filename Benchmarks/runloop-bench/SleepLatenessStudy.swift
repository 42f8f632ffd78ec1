import RunLoopKit
import RunLoopKitExecutors

/// How late `Task.sleep(until:)` 1 ms ahead resumes: on a resident thread's loop timer
/// (`withTaskExecutorPreference(thread.executor)`, RunLoopKitExecutors) and on the default
/// executor's Dispatch timer, in alternating rounds so drift on a shared machine falls on both.
/// Lateness runs from the deadline to the first instruction after the sleep.
enum SleepLatenessStudy {
  static func run(_ options: Options, progress: Progress) async throws -> [LatenessResult] {
    let rounds = 10
    let perRound = max(1, options.timerFires / rounds)
    let thread = try ResidentThread(name: "bench-sleep")
    var onLoop: [Int64] = []
    var onDefault: [Int64] = []
    for round in 0..<rounds {
      // Alternate which case goes first, so neither always follows the other.
      for loopFirst in round.isMultiple(of: 2) ? [true, false] : [false, true] {
        if loopFirst {
          onLoop += await sleepLateness(samples: perRound, preferring: thread.executor)
        } else {
          onDefault += await sleepLateness(samples: perRound, preferring: nil)
        }
      }
    }
    thread.stop()
    try thread.join()
    progress.note("Task.sleep lateness")
    return [
      LatenessResult(name: "Task.sleep, loop executor", distribution: Distribution(onLoop)),
      LatenessResult(name: "Task.sleep, default executor", distribution: Distribution(onDefault)),
    ]
  }

  /// Nonisolated, so the preference decides where the sleeps and the timing run.
  private static func sleepLateness(
    samples: Int, preferring executor: LoopExecutor?
  ) async -> [Int64] {
    await withTaskExecutorPreference(executor) {
      var lateness: [Int64] = []
      lateness.reserveCapacity(samples)
      for _ in 0..<samples {
        let deadline = ContinuousClock.now.advanced(by: .milliseconds(1))
        try? await Task.sleep(until: deadline, clock: .continuous)
        let late = deadline.duration(to: .now)
        lateness.append(
          late.components.seconds * 1_000_000_000 + late.components.attoseconds / 1_000_000_000)
      }
      return lateness
    }
  }
}
