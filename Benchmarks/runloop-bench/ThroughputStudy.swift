import CBenchBaselines
import Dispatch
import Glibc
import RunLoopKit
import Synchronization

struct ThroughputResult: Codable {
  let name: String
  let posters: Int
  let tasks: Int
  /// Median over rounds, with the slowest and fastest round.
  let tasksPerSecond: Double
  let lowest: Double
  let highest: Double
  /// Wake-ups sent per task (eventfd writes, or futex wakes for a loop asleep on its futex;
  /// RunLoopKit and the C floor), over every round.
  let wakeUpsPerTask: Double?
  /// This peer's rate over the C posting floor's, round by round (the two ran in the same
  /// round, so drift falls on both), sorted; nil for the floor itself.
  let roundRatios: [Double]?
}

/// Tasks per second from 1 and 4 posting threads into one consumer, every task counted as run
/// exactly once, and how many wake-up syscalls the posting cost. The peers run in interleaved
/// rounds (a fresh random order each round), so drift falls on all of them alike.
enum ThroughputStudy {
  static let floorName = "C posting floor (mutex queue + eventfd)"

  /// One peer: posts `tasks` tasks from `posters` threads and returns the seconds from the
  /// first post to the last task run, and the eventfd writes made (nil when not counted).
  struct Peer {
    let name: String
    let share: Int  // tasks are divided by this (CF is slow enough that a fifth is plenty)
    let run: (_ posters: Int, _ tasks: Int) throws -> (seconds: Double, writes: Int64?)
  }

  static func run(_ options: Options, progress: Progress) throws -> [ThroughputResult] {
    let target = try ResidentThread(name: "bench-tput")
    let cf = CFLoopThread()
    let queue = DispatchQueue(label: "bench.tput")
    let peers = [
      Peer(name: floorName, share: 1) { posters, tasks in
        var seconds = 0.0
        var writes: Int64 = 0
        let result = crb_posting_throughput(Int32(posters), Int64(tasks), &seconds, &writes)
        precondition(result == 0, "the C posting floor failed with errno \(result)")
        return (seconds, writes)
      },
      Peer(name: "Loop.perform", share: 1) { posters, tasks in
        let loop = target.loop
        let before = loop.metrics.wakeUpWrites
        let ran = TaskCounter()
        let seconds = timePosting(posters: posters, tasks: tasks, ran: ran) {
          try? loop.perform(in: .default) { ran.increment() }
        }
        return (seconds, Int64(loop.metrics.wakeUpWrites - before))
      },
      Peer(name: "ResidentThread.perform", share: 1) { posters, tasks in
        let before = target.loop.metrics.wakeUpWrites
        let ran = TaskCounter()
        let seconds = timePosting(posters: posters, tasks: tasks, ran: ran) {
          try? target.perform { ran.increment() }
        }
        return (seconds, Int64(target.loop.metrics.wakeUpWrites - before))
      },
      Peer(name: "DispatchQueue.async (serial)", share: 1) { posters, tasks in
        let ran = TaskCounter()
        let seconds = timePosting(posters: posters, tasks: tasks, ran: ran) {
          queue.async { ran.increment() }
        }
        return (seconds, nil)
      },
      Peer(name: "CFRunLoop perform + wake", share: 5) { posters, tasks in
        let ran = TaskCounter()
        let seconds = timePosting(posters: posters, tasks: tasks, ran: ran) {
          cf.post { ran.increment() }
        }
        return (seconds, nil)
      },
    ]
    var results: [ThroughputResult] = []
    var random = SplitMix(seed: 7)
    for posters in [1, 4] {
      var seconds = [[Double]](repeating: [], count: peers.count)
      var writes = [Int64?](repeating: nil, count: peers.count)
      // One untimed round first, every peer alike: a first round pays for memory the process
      // has never touched (page faults for the queue a flood of posts fills), which says
      // nothing about posting.
      for index in peers.indices {
        _ = try peers[index].run(posters, options.throughputTasks / peers[index].share)
      }
      for _ in 0..<options.throughputRounds {
        for index in peers.indices.shuffled(using: &random) {
          let tasks = options.throughputTasks / peers[index].share
          let measured = try peers[index].run(posters, tasks)
          seconds[index].append(measured.seconds)
          if let made = measured.writes { writes[index] = (writes[index] ?? 0) + made }
        }
      }
      for index in peers.indices {
        let tasks = options.throughputTasks / peers[index].share
        let rates = seconds[index].map { Double(tasks) / $0 }.sorted()
        // The floor is peer 0 and posts the full count: a rate ratio is its time over ours.
        let ratios =
          index == 0
          ? nil
          : zip(seconds[0], seconds[index]).map { floor, ours in
            (Double(tasks) / ours) / (Double(options.throughputTasks) / floor)
          }.sorted()
        results.append(
          ThroughputResult(
            name: peers[index].name, posters: posters, tasks: tasks,
            tasksPerSecond: medianOf(rates), lowest: rates.first!, highest: rates.last!,
            wakeUpsPerTask: writes[index].map {
              Double($0) / Double(tasks * options.throughputRounds)
            }, roundRatios: ratios))
      }
      progress.note("throughput: \(posters) poster(s)")
    }
    cf.stop()
    target.stop()
    try target.join()
    return results
  }

  /// Starts `posters` threads that together post `tasks` tasks as fast as they can, and returns
  /// the seconds from the first post until the last task has run.
  static func timePosting(
    posters: Int, tasks: Int, ran: TaskCounter, post: @escaping @Sendable () -> Void
  ) -> Double {
    let share = tasks / posters
    let start = crb_now_ns()
    let threads = (0..<posters).map { index in
      PosterThread(count: index == posters - 1 ? tasks - share * (posters - 1) : share, post: post)
    }
    for thread in threads { thread.join() }
    while ran.value < tasks { sched_yield() }
    return Double(crb_now_ns() - start) / 1e9
  }
}

/// Counts tasks run; a class so a posted closure captures one reference, as the C floor's
/// task carries one context pointer.
final class TaskCounter: Sendable {
  private let count = Atomic<Int>(0)
  func increment() { count.add(1, ordering: .relaxed) }
  var value: Int { count.load(ordering: .acquiring) }
}

/// A plain pthread that calls `post` `count` times.
final class PosterThread: Sendable {
  private let handle: Atomic<UInt>
  /// What `pthread_create` returned: 0, or the error that kept the thread from starting.
  let creationError: Int32

  init(count: Int, post: @escaping @Sendable () -> Void) {
    let box = Unmanaged.passRetained(PosterWork(count: count, post: post)).toOpaque()
    var thread = pthread_t()
    creationError = pthread_create(
      &thread, nil,
      { raw in
        let work = Unmanaged<PosterWork>.fromOpaque(raw!).takeRetainedValue()
        for _ in 0..<work.count { work.post() }
        return nil
      }, box)
    if creationError != 0 { Unmanaged<PosterWork>.fromOpaque(box).release() }
    handle = Atomic(UInt(thread))
  }

  /// Waits for the thread to finish (returns at once if it never started).
  func join() {
    guard creationError == 0 else { return }
    pthread_join(pthread_t(handle.load(ordering: .relaxed)), nil)
  }
}

private final class PosterWork: Sendable {
  let count: Int
  let post: @Sendable () -> Void
  init(count: Int, post: @escaping @Sendable () -> Void) {
    self.count = count
    self.post = post
  }
}
