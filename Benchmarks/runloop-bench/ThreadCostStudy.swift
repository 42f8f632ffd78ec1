import CBenchBaselines
import Glibc
import RunLoopKit
import Synchronization

struct IdleResult: Codable {
  let name: String
  let seconds: Double
  let cpuPercent: Double
}

struct ThreadCostResult: Codable {
  /// Time from just before pthread_create to the new thread's first instruction.
  let createToEntry: Distribution
  /// A fresh thread per task: create, run, join.
  let freshThreadTasksPerSecond: Double
  /// The same tasks posted to one resident thread.
  let residentTasksPerSecond: Double
  /// One-way latency of a task posted to a resident thread (from the wake-latency study).
  let residentPerTaskLatency: Distribution?
}

/// What an idle thread costs, and what a thread per task costs compared with keeping one alive.
enum ThreadCostStudy {
  static func idle(_ options: Options, progress: Progress) throws -> [IdleResult] {
    var results: [IdleResult] = []
    for (name, policy) in [
      ("idle resident thread (sleeps)", Loop.WaitPolicy.sleep),
      ("idle busy-waiting thread", .busyWait),
    ] {
      let thread = try ResidentThread(name: "bench-idle", waitPolicy: policy)
      let clock = try thread.performAndWait { ThreadCPUClock.current() }
      crb_sleep_ns(50_000_000)  // let it settle into its wait
      let cpuBefore = clock.nanoseconds
      let wallBefore = crb_now_ns()
      crb_sleep_ns(Int64(options.idleSeconds * 1e9))
      let cpu = Double(clock.nanoseconds - cpuBefore)
      let wall = Double(crb_now_ns() - wallBefore)
      thread.stop()
      try thread.join()
      results.append(IdleResult(name: name, seconds: wall / 1e9, cpuPercent: 100 * cpu / wall))
      progress.note("idle CPU: \(name)")
    }
    return results
  }

  static func keepAlive(
    _ options: Options, residentLatency: Distribution?, progress: Progress
  ) throws -> ThreadCostResult {
    let cycles = options.threadCycles
    var samples = [Int64](repeating: 0, count: cycles)
    var total: Int64 = 0
    let result = samples.withUnsafeMutableBufferPointer {
      crb_thread_create_latency($0.baseAddress!, Int32(cycles), &total)
    }
    precondition(result == 0, "pthread_create failed with \(result)")
    let freshRate = Double(cycles) / (Double(total) / 1e9)

    let thread = try ResidentThread(name: "bench-keep")
    let ran = Atomic<Int>(0)
    let start = crb_now_ns()
    for _ in 0..<cycles { try thread.perform { @Sendable in ran.add(1, ordering: .relaxed) } }
    while ran.load(ordering: .acquiring) < cycles { sched_yield() }
    let residentRate = Double(cycles) / (Double(crb_now_ns() - start) / 1e9)
    thread.stop()
    try thread.join()
    progress.note("thread per task vs resident thread")
    return ThreadCostResult(
      createToEntry: Distribution(samples), freshThreadTasksPerSecond: freshRate,
      residentTasksPerSecond: residentRate, residentPerTaskLatency: residentLatency)
  }
}
