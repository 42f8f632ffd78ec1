import CBenchBaselines
import CRunLoopShims
import Foundation
import Glibc
import RunLoopKit
import Synchronization

/// One row of the latency/CPU trade-off table.
struct SpinResult: Codable {
  let placement: Placement
  let pattern: String
  let policy: String
  let distribution: Distribution
  /// CPU the waiting thread used per second of wall time, in percent of one core.
  let cpuPercent: Double
}

/// Where a target thread records how late each post's work began.
final class LatencyLog: Sendable {
  private let next = Atomic<Int>(0)
  /// Each slot is written once by the target thread; read after the poster has seen every
  /// record counted (acquire on `next`).
  nonisolated(unsafe) private let samples: UnsafeMutablePointer<Int64>
  let capacity: Int

  init(capacity: Int) {
    self.capacity = capacity
    samples = .allocate(capacity: capacity)
  }
  deinit { samples.deallocate() }

  func record(postedAt: Int64) {
    let latency = crb_now_ns() - postedAt
    let index = next.load(ordering: .relaxed)
    guard index < capacity else { return }
    samples[index] = latency
    next.store(index + 1, ordering: .releasing)
  }

  var recorded: Int { next.load(ordering: .acquiring) }

  func waitForAll(_ expected: Int) {
    while recorded < expected { sched_yield() }
  }

  var all: [Int64] { Array(UnsafeBufferPointer(start: samples, count: recorded)) }
}

/// The heart of "wake latency versus busy-waiting": the same posts, under two traffic
/// patterns, to a loop that sleeps at once, spins for 1 µs, 10 µs or 100 µs first, adapts its
/// spin to the traffic, or never sleeps, with the latency each gets and the CPU the waiting
/// thread burns for it, with the poster on the waiting thread's CPU and on another one.
enum SpinWindowStudy {
  static let policies: [Loop.WaitPolicy] = [
    .sleep, .spinThenSleep(.microseconds(1)), .spinThenSleep(.microseconds(10)),
    .spinThenSleep(.microseconds(100)), .adaptive, .busyWait,
  ]

  static func run(_ options: Options, progress: Progress) throws -> [SpinResult] {
    var results: [SpinResult] = []
    let placements = Placement.available.filter { $0 != .unpinned }
    for placement in placements.isEmpty ? [.unpinned] : placements {
      for policy in policies {
        for pattern in ["sparse", "bursty"] {
          results.append(
            try measure(policy, pattern, placement, options: options))
          progress.note("spin window: \(placement.rawValue), \(policy), \(pattern)")
        }
      }
    }
    return results
  }

  /// One policy under one traffic pattern. Pinned apart, the poster and the waiting thread
  /// each have a core; pinned together, a spinning waiter holds the very CPU the poster needs.
  private static func measure(
    _ policy: Loop.WaitPolicy, _ pattern: String, _ placement: Placement, options: Options
  ) throws -> SpinResult {
    let target = placement.targetCPU
    let thread = try ResidentThread(
      name: "bench-spin", cpuAffinity: target >= 0 ? [Int(target)] : nil, waitPolicy: policy)
    let clock = try thread.performAndWait { ThreadCPUClock.current() }
    let posts = pattern == "sparse" ? options.bursts * 100 : options.bursts * 100
    let log = LatencyLog(capacity: posts)
    let loop = thread.loop
    let post = {
      let postedAt = crb_now_ns()
      try? loop.perform(in: .default) { log.record(postedAt: postedAt) }
    }
    var random = SplitMix(seed: 11)
    let cpuBefore = clock.nanoseconds
    let wallBefore = crb_now_ns()
    onPinnedThread(cpu: placement.posterCPU) {
      if pattern == "sparse" {
        // Posts spaced 30–80 µs apart at random.
        for _ in 0..<posts {
          crb_spin_ns(Int64.random(in: 30_000...80_000, using: &random))
          post()
        }
      } else {
        // Bursts of 100 posts about 5 µs apart, separated by 10 ms of silence.
        for _ in 0..<options.bursts {
          for _ in 0..<100 {
            crb_spin_ns(5_000)
            post()
          }
          crb_sleep_ns(10_000_000)
        }
      }
    }
    log.waitForAll(posts)
    let cpu = Double(clock.nanoseconds - cpuBefore)
    let wall = Double(crb_now_ns() - wallBefore)
    thread.stop()
    try thread.join()
    return SpinResult(
      placement: placement, pattern: pattern, policy: policy.description,
      distribution: Distribution(log.all), cpuPercent: 100 * cpu / wall)
  }
}

/// Runs `body` on a fresh thread pinned to `cpu` (-1: any CPU) and waits for it.
func onPinnedThread(cpu: Int32, _ body: () -> Void) {
  withoutActuallyEscaping(body) { escapable in
    let work = PinnedWork(cpu: cpu, body: escapable)
    var thread = pthread_t()
    let context = Unmanaged.passRetained(work).toOpaque()
    pthread_create(
      &thread, nil,
      { raw in
        let work = Unmanaged<PinnedWork>.fromOpaque(raw!).takeRetainedValue()
        _ = crb_pin_self(work.cpu)
        work.body()
        return nil
      }, context)
    pthread_join(thread, nil)
  }
}

/// The body and CPU handed to a pinned thread; the caller waits in pthread_join meanwhile.
private final class PinnedWork: @unchecked Sendable {  // used by one thread at a time (join)
  let cpu: Int32
  let body: () -> Void
  init(cpu: Int32, body: @escaping () -> Void) {
    self.cpu = cpu
    self.body = body
  }
}
