import CBenchBaselines
import RunLoopKit

/// One object that is both `SerialExecutor` and `TaskExecutor` (as `LoopExecutor` is) against
/// one that is only a `SerialExecutor`: swift-platform-executors dropped the double
/// conformance from its own types as a cost in the runtime. Two actors, each with its own
/// bench-local executor of one kind, both on one resident thread's loop (so a hop is a job
/// queued on the same thread, with no wake-up to time), call each other in turn;
/// both kinds queue their jobs the same way (`Loop.enqueueJob` with a closure), so the rounds
/// differ only in the conformance. Alternating rounds; the median of each.
struct ExecutorSplitResult: Codable {
  let calls: Int
  let bothNanosecondsPerCall: Double
  let serialOnlyNanosecondsPerCall: Double
  var ratio: Double { bothNanosecondsPerCall / serialOnlyNanosecondsPerCall }
}

/// Serial and task executor in one object, as `LoopExecutor`.
private final class BothExecutor: SerialExecutor, TaskExecutor, Sendable {
  let loop: Loop
  init(loop: Loop) { self.loop = loop }
  func enqueue(_ job: consuming ExecutorJob) {
    let unowned = UnownedJob(job)
    let serial = asUnownedSerialExecutor()
    let task = asUnownedTaskExecutor()
    try! loop.enqueueJob { unowned.runSynchronously(isolatedTo: serial, taskExecutor: task) }
  }
  func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
}

/// A serial executor only.
private final class SerialOnlyExecutor: SerialExecutor, Sendable {
  let loop: Loop
  init(loop: Loop) { self.loop = loop }
  func enqueue(_ job: consuming ExecutorJob) {
    let unowned = UnownedJob(job)
    let serial = asUnownedSerialExecutor()
    try! loop.enqueueJob { unowned.runSynchronously(on: serial) }
  }
  func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
}

private actor Player {
  let executor: any SerialExecutor
  nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
  init(executor: any SerialExecutor) { self.executor = executor }
  /// Touches the actor's state, so the call must run on its executor (the optimiser drops
  /// the hop to an actor whose method touches nothing).
  private var pings = 0
  func ping() { pings &+= 1 }

  /// `calls` calls to `other`, each a hop there and back; nanoseconds per call.
  func rally(with other: Player, calls: Int) async -> Double {
    let start = crb_now_ns()
    for _ in 0..<calls { await other.ping() }
    return Double(crb_now_ns() - start) / Double(calls)
  }
}

enum ExecutorSplitStudy {
  static func run(_ options: Options, progress: Progress) async throws -> ExecutorSplitResult {
    let calls = options.quick ? 20_000 : 200_000
    let rounds = options.quick ? 3 : 7
    let threads = try (0..<2).map { try ResidentThread(name: "bench-split-\($0)") }
    defer {
      for thread in threads {
        thread.stop()
        try? thread.join()
      }
    }
    let both = (
      Player(executor: BothExecutor(loop: threads[0].loop)),
      Player(executor: BothExecutor(loop: threads[0].loop))
    )
    let serialOnly = (
      Player(executor: SerialOnlyExecutor(loop: threads[1].loop)),
      Player(executor: SerialOnlyExecutor(loop: threads[1].loop))
    )
    var bothRounds: [Double] = []
    var serialRounds: [Double] = []
    for round in 0..<rounds {
      if round.isMultiple(of: 2) {
        bothRounds.append(await both.0.rally(with: both.1, calls: calls))
        serialRounds.append(await serialOnly.0.rally(with: serialOnly.1, calls: calls))
      } else {
        serialRounds.append(await serialOnly.0.rally(with: serialOnly.1, calls: calls))
        bothRounds.append(await both.0.rally(with: both.1, calls: calls))
      }
    }
    let jobs = threads.map { $0.loop.metrics.blocksRun }
    progress.note("executor split: \(rounds) rounds of \(calls) calls; jobs run per thread \(jobs)")
    return ExecutorSplitResult(
      calls: calls, bothNanosecondsPerCall: medianOf(bothRounds),
      serialOnlyNanosecondsPerCall: medianOf(serialRounds))
  }
}
