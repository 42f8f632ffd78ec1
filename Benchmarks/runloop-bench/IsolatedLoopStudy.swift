import CBenchBaselines
import Glibc
import RunLoopKit

/// What code that lives on a loop pays for the isolated view (`loop.assumeIsolated()`): a
/// block posted from the loop's own thread through the view against `Loop.perform`, and a
/// timer armed through the view (`addTimer`, which makes the timer and adds it) against a C
/// heap that allocates and inserts the same number of timers.
struct IsolatedLoopResult: Codable {
  let blocks: Int
  let timers: Int
  let rounds: [IsolatedLoopRound]
  /// Medians over the rounds.
  let viewPerformNanoseconds: Double
  let loopPerformNanoseconds: Double
  let viewArmNanosecondsPerTimer: Double
  let cArmNanosecondsPerTimer: Double
}

/// One round: the peers back to back, in an order that alternates between rounds.
struct IsolatedLoopRound: Codable {
  /// Post and run, per block, from the loop's own thread.
  let viewPerformNanoseconds: Double
  let loopPerformNanoseconds: Double
  /// Make and add, per timer, with `timers` timers in one mode.
  let viewArmNanosecondsPerTimer: Double
  let cArmNanosecondsPerTimer: Double
  /// Whether the view's arming ran before the C heap's this round (blocks take turns within
  /// a round).
  let viewFirst: Bool
}

enum IsolatedLoopStudy {
  /// Blocks posted between two drains: enough that the drain's own cost is shared out.
  static let burst = 1_000

  static func run(_ options: Options, progress: Progress) throws -> IsolatedLoopResult {
    let blocks = options.throughputTasks
    let timers = options.timerCount
    let thread = try ResidentThread(name: "bench-isolated")
    let rounds = try thread.performAndWait { () throws -> [IsolatedLoopRound] in
      let view = thread.loop.assumeIsolated()
      // Untimed: the first million timers fault their pages in, on both sides.
      _ = try armThroughView(timers, seed: 99, view: view)
      _ = try cArm(timers, seed: 99)
      var rounds: [IsolatedLoopRound] = []
      for round in 0..<(options.quick ? 3 : 5) {
        let viewFirst = round % 2 == 0
        let perform = try postAndRun(blocks, on: view)
        var arm = (view: 0.0, c: 0.0)
        for side in viewFirst ? [true, false] : [false, true] {
          if side {
            arm.view = try armThroughView(timers, seed: UInt64(round), view: view)
          } else {
            arm.c = try cArm(timers, seed: UInt64(round))
          }
        }
        rounds.append(
          IsolatedLoopRound(
            viewPerformNanoseconds: perform.view, loopPerformNanoseconds: perform.loop,
            viewArmNanosecondsPerTimer: arm.view, cArmNanosecondsPerTimer: arm.c,
            viewFirst: viewFirst))
      }
      return rounds
    }
    thread.stop()
    try thread.join()
    progress.note("isolated view: \(rounds.count) rounds")
    return IsolatedLoopResult(
      blocks: blocks, timers: timers, rounds: rounds,
      viewPerformNanoseconds: medianOf(rounds.map(\.viewPerformNanoseconds)),
      loopPerformNanoseconds: medianOf(rounds.map(\.loopPerformNanoseconds)),
      viewArmNanosecondsPerTimer: medianOf(rounds.map(\.viewArmNanosecondsPerTimer)),
      cArmNanosecondsPerTimer: medianOf(rounds.map(\.cArmNanosecondsPerTimer)))
  }

  /// Posts `count` blocks from the loop's own thread through the view and as many through
  /// `Loop.perform`, in bursts of `burst` that take turns (which goes first alternates), each
  /// burst run by a zero-length run of the loop: nanoseconds per block, posting and running
  /// included, for each. Bursts rather than whole halves, so that neither side always runs
  /// on a warmer cache or a quieter machine.
  private static func postAndRun(
    _ count: Int, on view: IsolatedLoop
  ) throws -> (view: Double, loop: Double) {
    let ran = TaskCounter()
    var elapsed = (view: Int64(0), loop: Int64(0))
    var posted = 0
    for turn in 0..<(count / burst) {
      for throughView in turn % 2 == 0 ? [true, false] : [false, true] {
        let start = crb_now_ns()
        for _ in 0..<burst {
          if throughView {
            try view.perform { ran.increment() }
          } else {
            try view.loop.perform { ran.increment() }
          }
        }
        posted += burst
        while ran.value < posted { view.loop.run(in: .default, for: .zero) }
        let took = crb_now_ns() - start
        if throughView { elapsed.view += took } else { elapsed.loop += took }
      }
    }
    let each = Double(count / burst * burst)
    return (Double(elapsed.view) / each, Double(elapsed.loop) / each)
  }

  /// Arms `count` timers through the view, fire dates spread at random over one second an
  /// hour ahead (as the C side draws them, in the timed loop); nanoseconds per timer. They
  /// are cancelled afterwards, outside the timed part.
  private static func armThroughView(
    _ count: Int, seed: UInt64, view: IsolatedLoop
  ) throws -> Double {
    var random = SplitMix(seed: seed)
    let base = LoopClock.Instant.now.advanced(by: .seconds(3600))
    var armed: [LoopTimer] = []
    armed.reserveCapacity(count)
    let start = crb_now_ns()
    for _ in 0..<count {
      let date = base.advanced(by: .nanoseconds(Int64(random.next() % 1_000_000_000)))
      armed.append(try view.addTimer(fireAt: date, to: "arm") { _ in })
    }
    let elapsed = crb_now_ns() - start
    for timer in armed { timer.invalidate() }
    return Double(elapsed) / Double(count)
  }

  /// The C heap's allocate-and-insert (`crb_timer_heap_arm_cost`), per timer.
  private static func cArm(_ count: Int, seed: UInt64) throws -> Double {
    var elapsed: Int64 = 0
    let error = crb_timer_heap_arm_cost(Int32(count), seed, &elapsed)
    guard error == 0 else { throw CTimerHeapError(code: error) }
    return Double(elapsed) / Double(count)
  }
}

extension Report {
  func printIsolatedLoop() {
    guard let isolated else { return }
    print("\nCode on a loop: the isolated view (loop.assumeIsolated()) against its peers")
    print(
      "(perform: \(isolated.blocks) blocks posted on the loop's own thread and run, per block;\n"
        + " arm: \(isolated.timers) timers made and added through the view, per timer, against\n"
        + " the C heap allocating and inserting as many; ratio = view / peer)\n")
    printPairedTable(
      (("view", "perform"), ("view arm", "C arm")),
      rounds: isolated.rounds.enumerated().map { index, round in
        (
          "\(index + 1)\(round.viewFirst ? " (view 1st)" : "")",
          (round.viewPerformNanoseconds, round.loopPerformNanoseconds),
          (round.viewArmNanosecondsPerTimer, round.cArmNanosecondsPerTimer)
        )
      },
      median: (
        (isolated.viewPerformNanoseconds, isolated.loopPerformNanoseconds),
        (isolated.viewArmNanosecondsPerTimer, isolated.cArmNanosecondsPerTimer)
      ))
  }
}
