import Dispatch
import RunLoopKit

/// One row of the group study: a consumer, a number of posters, and its throughput against
/// one `ResidentThread` fed by as many posters.
struct GroupThroughputResult: Codable {
  let name: String
  /// Threads that run the tasks: 1 or 2 for RunLoopKit; nil for a concurrent Dispatch queue
  /// (as many worker threads as Dispatch chooses).
  let consumers: Int?
  let posters: Int
  let tasks: Int
  /// Median over rounds, with the slowest and fastest round.
  let tasksPerSecond: Double
  let lowest: Double
  let highest: Double
  /// This row's tasks/s over one `ResidentThread.perform`'s with as many posters: the median
  /// of the per-round ratios (each round measures both, close together in time).
  let ratioToResidentThread: Double
  /// Wake-up syscalls per task over every round, summed over the consumer's loops
  /// (RunLoopKit only).
  let wakeUpsPerTask: Double?
}

/// What a `ResidentThreadGroup` buys when posters spread tiny tasks over its threads with
/// `group.next().perform`: a group of 1 and of 2 against one `ResidentThread.perform`, a
/// serial `DispatchQueue`, and a concurrent `DispatchQueue` (Dispatch's own way of spreading
/// work over threads: a private concurrent queue, which runs on Dispatch's worker pool), from
/// 1 and 4 posting threads. Tasks are posted as fast as possible and every one is counted as
/// run exactly once (one shared atomic counter, as in the throughput study: the consumers that
/// run in parallel share its cache line). Peers run in interleaved rounds, in a fresh random
/// order each round.
enum GroupThroughputStudy {
  static let residentName = "ResidentThread.perform (1 thread)"

  private struct Peer {
    let name: String
    let consumers: Int?
    /// The loops whose wake-up writes are counted (none for Dispatch).
    let loops: [Loop]
    let post: @Sendable (TaskCounter) -> Void
  }

  static func run(_ options: Options, progress: Progress) throws -> [GroupThroughputResult] {
    let single = try ResidentThread(name: "bench-single")
    let groupOfOne = try ResidentThreadGroup(count: 1, name: "bench-g1")
    let groupOfTwo = try ResidentThreadGroup(count: 2, name: "bench-g2")
    let serial = DispatchQueue(label: "bench.group.serial")
    let concurrent = DispatchQueue(label: "bench.group.concurrent", attributes: .concurrent)
    let peers = [
      Peer(name: residentName, consumers: 1, loops: [single.loop]) { ran in
        try? single.perform { ran.increment() }
      },
      Peer(name: "group of 1, next().perform", consumers: 1, loops: groupOfOne.threads.map(\.loop))
      { ran in
        try? groupOfOne.next().perform { ran.increment() }
      },
      Peer(name: "group of 2, next().perform", consumers: 2, loops: groupOfTwo.threads.map(\.loop))
      { ran in
        try? groupOfTwo.next().perform { ran.increment() }
      },
      Peer(name: "DispatchQueue.async (serial)", consumers: 1, loops: []) { ran in
        serial.async { ran.increment() }
      },
      Peer(name: "DispatchQueue.async (concurrent)", consumers: nil, loops: []) { ran in
        concurrent.async { ran.increment() }
      },
    ]
    let tasks = options.groupTasks
    var results: [GroupThroughputResult] = []
    var random = SplitMix(seed: 85)
    for posters in [1, 4] {
      var rates = [[Double]](repeating: [], count: peers.count)
      var writes = [UInt64](repeating: 0, count: peers.count)
      for _ in 0..<options.groupRounds {
        for index in peers.indices.shuffled(using: &random) {
          let peer = peers[index]
          let before = peer.loops.reduce(0) { $0 + $1.metrics.wakeUpWrites }
          let ran = TaskCounter()
          let seconds = ThroughputStudy.timePosting(posters: posters, tasks: tasks, ran: ran) {
            peer.post(ran)
          }
          rates[index].append(Double(tasks) / seconds)
          writes[index] += peer.loops.reduce(0) { $0 + $1.metrics.wakeUpWrites } - before
        }
      }
      for index in peers.indices {
        let ratios = zip(rates[index], rates[0]).map { $0 / $1 }
        let sorted = rates[index].sorted()
        let median = medianOf(sorted)
        results.append(
          GroupThroughputResult(
            name: peers[index].name, consumers: peers[index].consumers, posters: posters,
            tasks: tasks, tasksPerSecond: median, lowest: sorted.first!, highest: sorted.last!,
            ratioToResidentThread: medianOf(ratios),
            wakeUpsPerTask: peers[index].loops.isEmpty
              ? nil : Double(writes[index]) / Double(tasks * options.groupRounds)))
      }
      progress.note("group throughput: \(posters) poster(s)")
    }
    for group in [groupOfOne, groupOfTwo] { group.stop() }
    single.stop()
    try groupOfOne.join()
    try groupOfTwo.join()
    try single.join()
    return results
  }
}

extension Report {
  func printGroupThroughput() {
    guard !groupThroughput.isEmpty else { return }
    let tasks = groupThroughput[0].tasks
    print("\nResidentThreadGroup throughput: \(tasks) tiny tasks posted as fast as possible")
    print(
      "(group.next().perform; median of interleaved rounds, slowest–fastest round after it;\n"
        + " ratio = tasks/s over one ResidentThread's with as many posters, median of the\n"
        + " rounds' ratios; every task bumps one shared atomic counter; unpinned)\n")
    print(
      pad("consumer", 36) + pad("threads", 8, right: true) + pad("posters", 8, right: true)
        + pad("tasks/s", 10, right: true) + pad("(rounds)", 16, right: true)
        + pad("ratio", 8, right: true) + pad("wake-ups/task", 15, right: true))
    for result in groupThroughput {
      print(
        pad(result.name, 36) + pad(result.consumers.map { "\($0)" } ?? "pool", 8, right: true)
          + pad("\(result.posters)", 8, right: true)
          + pad(fixed(result.tasksPerSecond / 1e6, 2) + " M", 10, right: true)
          + pad(
            fixed(result.lowest / 1e6, 2) + "–" + fixed(result.highest / 1e6, 2) + " M", 16,
            right: true)
          + pad(fixed(result.ratioToResidentThread, 2) + "×", 8, right: true)
          + pad(result.wakeUpsPerTask.map { fixed($0, 4) } ?? "—", 15, right: true))
    }
  }
}
