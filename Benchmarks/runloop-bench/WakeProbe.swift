import CBenchBaselines
import Glibc
import Synchronization

/// Measures one-way wake latency the same way for every Swift peer: the poster stamps the time,
/// posts, and waits (spinning) until the target thread has recorded the moment its work began;
/// then it sleeps a random gap so the target is really asleep before the next post.
final class WakeProbe: Sendable {
  private let postedAt = Atomic<Int64>(0)
  private let completed = Atomic<Int>(0)
  /// Slot i is written once by the target thread before it publishes `completed = i + 1`
  /// (release) and read by the poster only after it has seen that value (acquire).
  nonisolated(unsafe) private let samples: UnsafeMutablePointer<Int64>
  let count: Int

  init(count: Int) {
    self.count = count
    samples = .allocate(capacity: count)
    samples.initialize(repeating: 0, count: count)
  }

  deinit { samples.deallocate() }

  /// Called first thing by the work on the target thread.
  func arrive() { arrive(wokeAt: crb_now_ns()) }

  /// For work that must drain something before the next post may come (an eventfd): stamp
  /// the time first, drain, then publish.
  func arrive(wokeAt now: Int64) {
    let index = completed.load(ordering: .relaxed)
    guard index < count else { return }
    samples[index] = now - postedAt.load(ordering: .acquiring)
    completed.store(index + 1, ordering: .releasing)
  }

  /// Posts `count` times with `post`, each after a random gap, and returns the latencies.
  func measure(gap: ClosedRange<Int64>, seed: UInt64 = 42, _ post: () -> Void) -> [Int64] {
    var random = SplitMix(seed: seed)
    for index in 0..<count {
      crb_sleep_ns(Int64.random(in: gap, using: &random))
      postedAt.store(crb_now_ns(), ordering: .releasing)
      post()
      waitFor(index + 1)
    }
    return Array(UnsafeBufferPointer(start: samples, count: count))
  }

  /// The async flavour, for actor hops: `post` awaits the hop itself.
  func measureAsync(gap: ClosedRange<Int64>, seed: UInt64 = 42, _ post: () async -> Void) async
    -> [Int64]
  {
    var random = SplitMix(seed: seed)
    for index in 0..<count {
      crb_sleep_ns(Int64.random(in: gap, using: &random))
      postedAt.store(crb_now_ns(), ordering: .releasing)
      await post()
      waitFor(index + 1)
    }
    return Array(UnsafeBufferPointer(start: samples, count: count))
  }

  private func waitFor(_ expected: Int) {
    var spins = 0
    while completed.load(ordering: .acquiring) < expected {
      spins += 1
      // On 2 cores a poster that never yields could starve a target scheduled on its core.
      if spins % 1024 == 0 { sched_yield() }
    }
  }
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
