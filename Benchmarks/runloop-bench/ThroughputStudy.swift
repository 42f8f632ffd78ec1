import CBenchBaselines
import Dispatch
import Glibc
import RunLoopKit
import Synchronization

struct ThroughputResult: Codable {
  let name: String
  let posters: Int
  let tasks: Int
  let tasksPerSecond: Double
  /// Wake-up eventfd writes per task (RunLoopKit cases only).
  let eventfdWritesPerTask: Double?
}

/// Tasks per second from 1 and 4 posting threads into one consumer, every task counted as run
/// exactly once, and how many wake-up syscalls the posting cost.
enum ThroughputStudy {
  static func run(_ options: Options, progress: Progress) throws -> [ThroughputResult] {
    var results: [ThroughputResult] = []
    for posters in [1, 4] {
      let tasks = options.throughputTasks
      // RunLoopKit: Loop.perform into a resident thread's loop.
      do {
        let thread = try ResidentThread(name: "bench-tput")
        let loop = thread.loop
        let writesBefore = loop.metrics.wakeUpWrites
        let ran = Atomic<Int>(0)
        let seconds = timePosting(posters: posters, tasks: tasks, ran: ran) {
          try? loop.perform(in: .default) { @Sendable in ran.add(1, ordering: .relaxed) }
        }
        let writes = Double(loop.metrics.wakeUpWrites - writesBefore) / 3
        precondition(ran.load(ordering: .relaxed) == 3 * tasks, "a task ran twice or never")
        thread.stop()
        try thread.join()
        results.append(
          ThroughputResult(
            name: "Loop.perform", posters: posters, tasks: tasks,
            tasksPerSecond: Double(tasks) / seconds, eventfdWritesPerTask: writes / Double(tasks)))
      }
      // DispatchQueue (serial).
      do {
        let queue = DispatchQueue(label: "bench.tput")
        let ran = Atomic<Int>(0)
        let seconds = timePosting(posters: posters, tasks: tasks, ran: ran) {
          queue.async { ran.add(1, ordering: .relaxed) }
        }
        results.append(
          ThroughputResult(
            name: "DispatchQueue.async (serial)", posters: posters, tasks: tasks,
            tasksPerSecond: Double(tasks) / seconds, eventfdWritesPerTask: nil))
      }
      // CFRunLoop: CFRunLoopPerformBlock + CFRunLoopWakeUp for every task.
      do {
        let cf = CFLoopThread()
        let ran = Atomic<Int>(0)
        let cfTasks = tasks / 5  // CF is slow enough that a fifth of the tasks gives a stable rate
        let seconds = timePosting(posters: posters, tasks: cfTasks, ran: ran) {
          cf.post { ran.add(1, ordering: .relaxed) }
        }
        cf.stop()
        results.append(
          ThroughputResult(
            name: "CFRunLoop perform + wake", posters: posters, tasks: cfTasks,
            tasksPerSecond: Double(cfTasks) / seconds, eventfdWritesPerTask: nil))
      }
      progress.note("throughput: \(posters) poster(s)")
    }
    return results
  }

  /// Starts `posters` threads that together post `tasks` tasks as fast as they can, and returns
  /// the seconds from the first post until the last task has run.
  static func timePosting(
    posters: Int, tasks: Int, ran: borrowing Atomic<Int>, post: @escaping @Sendable () -> Void
  ) -> Double {
    // Rates on a shared 2-core VM swing by ±50 % from run to run: take the median of three.
    var seconds: [Double] = []
    for round in 1...3 {
      seconds.append(
        timeOnce(posters: posters, tasks: tasks, expected: tasks * round, ran: ran, post: post))
    }
    return seconds.sorted()[1]
  }

  private static func timeOnce(
    posters: Int, tasks: Int, expected: Int, ran: borrowing Atomic<Int>,
    post: @escaping @Sendable () -> Void
  ) -> Double {
    let share = tasks / posters
    let start = crb_now_ns()
    let threads = (0..<posters).map { index in
      PosterThread(count: index == posters - 1 ? tasks - share * (posters - 1) : share, post: post)
    }
    for thread in threads { thread.join() }
    while ran.load(ordering: .acquiring) < expected { sched_yield() }
    return Double(crb_now_ns() - start) / 1e9
  }
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
