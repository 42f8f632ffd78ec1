import CBenchBaselines
import CRunLoopShims
import Foundation
import Glibc
import RunLoopKit
import Synchronization

/// One row of the latency/CPU trade-off table.
struct SpinResult: Codable {
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
/// patterns, to a loop that sleeps at once, spins for 1 µs, 10 µs or 100 µs first, or never
/// sleeps, with the latency each gets and the CPU the waiting thread burns for it.
enum SpinWindowStudy {
  static let policies: [Loop.WaitPolicy] = [
    .sleep, .spinThenSleep(.microseconds(1)), .spinThenSleep(.microseconds(10)),
    .spinThenSleep(.microseconds(100)), .busyWait,
  ]

  static func run(_ options: Options, progress: Progress) throws -> [SpinResult] {
    var results: [SpinResult] = []
    for policy in policies {
      for pattern in ["sparse", "bursty"] {
        // The waiting thread and the poster each get a core of their own: the poster spins
        // between posts, and a waiter woken onto the poster's core would wait for the
        // scheduler to preempt it, which measures the scheduler, not the wait policy.
        let pinned = ProcessInfo.processInfo.activeProcessorCount >= 2
        let thread = try ResidentThread(
          name: "bench-spin", cpuAffinity: pinned ? [1] : nil, waitPolicy: policy)
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
        onPinnedThread(cpu: pinned ? 0 : nil) {
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
        results.append(
          SpinResult(
            pattern: pattern, policy: policy.description, distribution: Distribution(log.all),
            cpuPercent: 100 * cpu / wall))
        progress.note("spin window: \(policy), \(pattern)")
      }
    }
    return results
  }
}

/// Runs `body` on a fresh thread pinned to `cpu` (or unpinned) and waits for it.
func onPinnedThread(cpu: Int32?, _ body: () -> Void) {
  withoutActuallyEscaping(body) { escapable in
    let work = PinnedWork(cpu: cpu, body: escapable)
    var thread = pthread_t()
    let context = Unmanaged.passRetained(work).toOpaque()
    pthread_create(
      &thread, nil,
      { raw in
        let work = Unmanaged<PinnedWork>.fromOpaque(raw!).takeRetainedValue()
        if var cpu = work.cpu { _ = crl_set_thread_affinity(&cpu, 1) }
        work.body()
        return nil
      }, context)
    pthread_join(thread, nil)
  }
}

/// The body and CPU handed to a pinned thread; the caller waits in pthread_join meanwhile.
private final class PinnedWork: @unchecked Sendable {  // used by one thread at a time (join)
  let cpu: Int32?
  let body: () -> Void
  init(cpu: Int32?, body: @escaping () -> Void) {
    self.cpu = cpu
    self.body = body
  }
}
