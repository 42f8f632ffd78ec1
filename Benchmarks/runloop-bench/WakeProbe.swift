import CBenchBaselines
import CRunLoopShims
import Glibc
import Synchronization

/// Measures one-way wake latency the same way for every Swift peer, and the same way the C
/// floors do (wake_harness.c): the poster sleeps a random gap so the target is really asleep,
/// stamps the time, posts, and waits for the target to record the moment its work began. The
/// poster waits by yielding its CPU at every check, so a target woken onto the poster's CPU
/// runs at once instead of waiting for the scheduler to preempt a spinning poster.
final class WakeProbe: Sendable {
  private let postedAt = Atomic<Int64>(0)
  private let completed = Atomic<Int>(0)
  /// Slot i is written once by the target thread before it publishes `completed = i + 1`
  /// (release) and read by the poster only after it has seen that value (acquire).
  nonisolated(unsafe) private let samples: UnsafeMutablePointer<Int64>
  let capacity: Int
  /// Samples in the current batch (set by `begin`, read by the target after the post's
  /// release/acquire on `postedAt`).
  private let count = Atomic<Int>(0)
  /// The CPU the work should run on (-1: any). Work that ran elsewhere is counted, and with
  /// `repin` (for threads the bench does not own, such as Dispatch's workers) the thread pins
  /// itself there for the samples that follow.
  private let targetCPU = Atomic<Int32>(-1)
  private let repin = Atomic<Bool>(false)
  private let misplacedCount = Atomic<Int>(0)
  private let posterThread = Atomic<Int32>(0)
  private let onPosterThreadCount = Atomic<Int>(0)

  init(capacity: Int) {
    self.capacity = capacity
    samples = .allocate(capacity: capacity)
    samples.initialize(repeating: 0, count: capacity)
  }

  deinit { samples.deallocate() }

  /// Starts a batch of `count` samples; call while the target is idle.
  func begin(count: Int, targetCPU: Int32, repin: Bool) {
    precondition(count <= capacity)
    self.count.store(count, ordering: .relaxed)
    self.targetCPU.store(targetCPU, ordering: .relaxed)
    self.repin.store(repin, ordering: .relaxed)
    misplacedCount.store(0, ordering: .relaxed)
    onPosterThreadCount.store(0, ordering: .relaxed)
    completed.store(0, ordering: .releasing)
  }

  /// Called first thing by the work on the target thread.
  func arrive() { arrive(wokeAt: crb_now_ns()) }

  /// For work that must do something before the next post may come (drain an eventfd): stamp
  /// the time first, then do it, then call this with the stamp.
  func arrive(wokeAt now: Int64) {
    let index = completed.load(ordering: .relaxed)
    guard index < count.load(ordering: .relaxed) else { return }
    samples[index] = now - postedAt.load(ordering: .acquiring)
    checkPlacement()
    completed.store(index + 1, ordering: .releasing)
  }

  private func checkPlacement() {
    if crl_gettid() == posterThread.load(ordering: .relaxed) {
      onPosterThreadCount.add(1, ordering: .relaxed)
    }
    let cpu = targetCPU.load(ordering: .relaxed)
    guard cpu >= 0, crb_current_cpu() != cpu else { return }
    misplacedCount.add(1, ordering: .relaxed)
    if repin.load(ordering: .relaxed) { _ = crb_pin_self(cpu) }
  }

  /// Posts `count` times with `post` from the calling thread, each after a random gap.
  func measure(gap: ClosedRange<Int64>, seed: UInt64, _ post: () -> Void) -> WakeSamples {
    posterThread.store(crl_gettid(), ordering: .relaxed)
    var random = SplitMix(seed: seed)
    for index in 0..<count.load(ordering: .relaxed) {
      crb_sleep_ns(Int64.random(in: gap, using: &random))
      postedAt.store(crb_now_ns(), ordering: .releasing)
      post()
      waitFor(index + 1)
    }
    return collect()
  }

  /// The async flavour, for actor hops: `post` awaits the hop itself.
  func measureAsync(
    gap: ClosedRange<Int64>, seed: UInt64, _ post: () async -> Void
  ) async -> WakeSamples {
    posterThread.store(crl_gettid(), ordering: .relaxed)
    var random = SplitMix(seed: seed)
    for index in 0..<count.load(ordering: .relaxed) {
      crb_sleep_ns(Int64.random(in: gap, using: &random))
      postedAt.store(crb_now_ns(), ordering: .releasing)
      await post()
      waitFor(index + 1)
    }
    return collect()
  }

  private func collect() -> WakeSamples {
    WakeSamples(
      values: Array(UnsafeBufferPointer(start: samples, count: count.load(ordering: .relaxed))),
      misplaced: misplacedCount.load(ordering: .relaxed),
      onPosterThread: onPosterThreadCount.load(ordering: .relaxed))
  }

  private func waitFor(_ expected: Int) {
    while completed.load(ordering: .acquiring) < expected { sched_yield() }
  }
}

/// One batch of wake samples, with how often the work ran off its CPU or on the poster's
/// own thread (then nothing was woken).
struct WakeSamples {
  var values: [Int64]
  var misplaced = 0
  var onPosterThread = 0
}

/// A small, fast, seedable generator so every run posts with the same gaps.
struct SplitMix: RandomNumberGenerator {
  var state: UInt64
  init(seed: UInt64) { state = seed }
  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// CPU time used by one thread, from the kernel's per-thread accounting.
struct ThreadCPUClock: Sendable {
  let id: clockid_t

  /// The calling thread's clock.
  static func current() -> ThreadCPUClock {
    var id = clockid_t()
    pthread_getcpuclockid(pthread_self(), &id)
    return ThreadCPUClock(id: id)
  }

  var nanoseconds: Int64 {
    var time = timespec()
    clock_gettime(id, &time)
    return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
  }
}
