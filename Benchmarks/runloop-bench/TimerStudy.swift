import CBenchBaselines
import CoreFoundation
import Dispatch
import Glibc
import RunLoopKit
import Synchronization

/// A million timers through one mode's heap, against a C timer heap doing the same work.
struct TimerScaleResult: Codable {
  let timers: Int
  /// The median round's totals, in seconds (`addNanosecondsPerTimer` × `timers`, and so on).
  let addSeconds: Double
  let cancelSeconds: Double
  let fireAllSeconds: Double
  let fired: Int
  /// Every round, in the order run.
  let rounds: [TimerScaleRound]
  /// Medians over the rounds, per timer: `loop.add(timer, to:)` and `timer.invalidate()`
  /// (random order), and the C heap's insert and remove (`crb_timer_heap_cost`).
  let addNanosecondsPerTimer: Double
  let cancelNanosecondsPerTimer: Double
  let cAddNanosecondsPerTimer: Double
  let cCancelNanosecondsPerTimer: Double
}

/// One round of the timer-scale study: ours and the C heap's cost per timer, run back to back.
struct TimerScaleRound: Codable {
  let addNanosecondsPerTimer: Double
  let cancelNanosecondsPerTimer: Double
  let cAddNanosecondsPerTimer: Double
  let cCancelNanosecondsPerTimer: Double
  /// Whether the C heap ran first this round (the order alternates, so neither side always
  /// inherits the other's cache and allocator state).
  let cFirst: Bool
}

/// A million timers through one mode's heap (lateness: `TimerLatenessStudy`).
enum TimerStudy {
  /// Rounds of add-all then cancel-all for LoopTimer and for the C heap, interleaved, then one
  /// fire-all. What is timed, on both sides, is the add loop and the cancel loop only: the
  /// timers are made (one allocation each, fire dates drawn from the same generator) before
  /// the add loop and freed after the cancel loop, and the shuffle between them is untimed.
  /// Ours: `loop.add(timer, to:)` on the loop's own thread (the loop lock and the timer's
  /// stripe, binding, the heap's reference) and `timer.invalidate()` (both locks again, the
  /// handler released, the loop's and the heap's references dropped). The C heap's: a
  /// libuv-style insert and remove on timers it made, with no lock and no reference count.
  static func scale(_ options: Options, progress: Progress) throws -> TimerScaleResult {
    let count = options.timerCount
    let roundCount = options.quick ? 3 : 5
    let thread = try ResidentThread(name: "bench-timers")
    let loop = thread.loop
    let result = try thread.performAndWait { () throws -> TimerScaleResult in
      var rounds: [TimerScaleRound] = []
      for round in 0..<roundCount {
        let seed = UInt64(5 + round)
        let cFirst = round % 2 == 1
        var c = (add: 0.0, cancel: 0.0)
        if cFirst { c = try cHeapCost(count, seed: seed) }
        let ours = try loopTimerCost(count, seed: seed, loop: loop)
        if !cFirst { c = try cHeapCost(count, seed: seed) }
        rounds.append(
          TimerScaleRound(
            addNanosecondsPerTimer: ours.add, cancelNanosecondsPerTimer: ours.cancel,
            cAddNanosecondsPerTimer: c.add, cCancelNanosecondsPerTimer: c.cancel, cFirst: cFirst))
      }

      // Fire all: timers due within the next 10 ms, run until every one has fired.
      var random = SplitMix(seed: 5)
      let fired = Atomic<Int>(0)
      let soon = LoopClock.Instant.now.advanced(by: .milliseconds(50))
      for _ in 0..<count {
        let date = soon.advanced(by: .nanoseconds(Int64.random(in: 0..<10_000_000, using: &random)))
        try loop.add(
          LoopTimer(fireAt: date) { @Sendable _ in fired.add(1, ordering: .relaxed) }, to: "fire")
      }
      let start = crb_now_ns()
      while fired.load(ordering: .relaxed) < count {
        loop.run(in: "fire", for: .seconds(10))
      }
      let fireAll = Double(crb_now_ns() - start) / 1e9

      let add = medianOf(rounds.map(\.addNanosecondsPerTimer))
      let cancel = medianOf(rounds.map(\.cancelNanosecondsPerTimer))
      return TimerScaleResult(
        timers: count, addSeconds: add * Double(count) / 1e9,
        cancelSeconds: cancel * Double(count) / 1e9, fireAllSeconds: fireAll,
        fired: fired.load(ordering: .relaxed), rounds: rounds,
        addNanosecondsPerTimer: add, cancelNanosecondsPerTimer: cancel,
        cAddNanosecondsPerTimer: medianOf(rounds.map(\.cAddNanosecondsPerTimer)),
        cCancelNanosecondsPerTimer: medianOf(rounds.map(\.cCancelNanosecondsPerTimer)))
    }
    thread.stop()
    try thread.join()
    progress.note("timer scale: \(count) timers, \(roundCount) rounds")
    return result
  }

  /// Adds `count` timers with random fire dates to one mode, then invalidates them in random
  /// order: the heap's O(log n) insert and removal. Nanoseconds per timer for each.
  private static func loopTimerCost(
    _ count: Int, seed: UInt64, loop: Loop
  ) throws -> (add: Double, cancel: Double) {
    let base = LoopClock.Instant.now.advanced(by: .seconds(3600))
    var random = SplitMix(seed: seed)
    var timers: [LoopTimer] = []
    timers.reserveCapacity(count)
    for _ in 0..<count {
      let date = base.advanced(
        by: .nanoseconds(Int64.random(in: 0..<1_000_000_000, using: &random)))
      timers.append(try LoopTimer(fireAt: date) { _ in })
    }
    // Named once, as a program names its modes: a `Loop.Mode` made from a string in the
    // timed loop cost some 30 instructions per add (callgrind), and the C side names no mode.
    let mode: Loop.Mode = "scale"
    var start = crb_now_ns()
    for timer in timers { try loop.add(timer, to: mode) }
    let add = crb_now_ns() - start
    timers.shuffle(using: &random)
    start = crb_now_ns()
    for timer in timers { timer.invalidate() }
    let cancel = crb_now_ns() - start
    return (Double(add) / Double(count), Double(cancel) / Double(count))
  }

  /// The same work on the C heap (`crb_timer_heap_cost`), in nanoseconds per timer.
  private static func cHeapCost(_ count: Int, seed: UInt64) throws -> (add: Double, cancel: Double)
  {
    var add: Int64 = 0
    var cancel: Int64 = 0
    let error = crb_timer_heap_cost(Int32(count), seed, &add, &cancel)
    guard error == 0 else { throw CTimerHeapError(code: error) }
    return (Double(add) / Double(count), Double(cancel) / Double(count))
  }
}

/// `crb_timer_heap_cost` failed: ENOMEM, or EINVAL for a heap that came out inconsistent.
struct CTimerHeapError: Error, CustomStringConvertible {
  let code: Int32
  var description: String { "the C timer heap baseline failed: \(String(cString: strerror(code)))" }
}

extension CFRunLoopMode {
  static var defaultMode: CFRunLoopMode { kCFRunLoopDefaultMode }
}
