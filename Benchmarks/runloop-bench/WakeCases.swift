import CBenchBaselines
import CRunLoopShims
import Dispatch
import Glibc
import RunLoopKit

/// An actor on the default (global) executor: awaited from a task, it runs on the awaiting
/// thread when it is free, so hopping onto it wakes nothing.
actor DefaultActor {
  func touch(_ probe: WakeProbe) { probe.arrive() }
}

/// An actor pinned to a resident thread.
actor PinnedActor {
  let thread: ResidentThread
  init(thread: ResidentThread) { self.thread = thread }
  nonisolated var unownedExecutor: UnownedSerialExecutor {
    thread.executor.asUnownedSerialExecutor()
  }
  func touch(_ probe: WakeProbe) { probe.arrive() }
}

/// Names the study, the chart and the targets share.
enum WakeCases {
  static let performWithDescriptors = "Loop.perform, fd in mode (epoll)"
}

/// One way of handing work to another thread, measured as a wake.
struct WakeCase {
  let name: String
  /// False for the rows that never wake a sleeping thread (a spinning consumer, an actor hop
  /// that runs on the awaiting thread): they go to a table of their own.
  let wakesSleepingThread: Bool
  /// Takes `count` samples in `placement` with the posting gaps drawn from `seed`.
  let sample: (_ placement: Placement, _ count: Int, _ seed: UInt64) async throws -> WakeSamples
}

/// The threads, queues and sources the wake cases post to, created once for the whole study
/// so that every round measures warm paths.
final class WakeTargets {
  static let gap: ClosedRange<Int64> = 50_000...150_000

  /// The loop every case without a descriptor posts to: its mode watches no descriptor, so
  /// it sleeps on its futex.
  let target: ResidentThread
  /// The loop the descriptor and port cases post to: its mode watches descriptors, so it
  /// sleeps in `epoll_wait`.
  let descriptorTarget: ResidentThread
  /// The thread the actor hops are awaited from (a task prefers its executor).
  let poster: ResidentThread
  let cf = CFLoopThread()
  let queue = DispatchQueue(label: "bench.serial")
  private var cleanups: [() -> Void] = []
  private(set) var cases: [WakeCase] = []

  init(samples: Int) throws {
    target = try ResidentThread(name: "bench-target")
    descriptorTarget = try ResidentThread(name: "bench-fd-target")
    poster = try ResidentThread(name: "bench-poster")
    addCFloors(samples: samples)
    addPeers(samples: samples)
    try addLoopCases(samples: samples)
    addActorHops(samples: samples)
  }

  func close() throws {
    for cleanup in cleanups { cleanup() }
    cf.stop()
    for thread in [target, descriptorTarget, poster] {
      thread.stop()
      try thread.join()
    }
  }

  // MARK: The cases

  private func addCFloors(samples: Int) {
    typealias Floor = (
      UnsafeMutablePointer<Int64>?, Int32, Int64, Int64, UInt32, Int32
    ) -> Int32
    func floor(_ name: String, wakes: Bool = true, _ run: @escaping Floor) {
      cases.append(
        WakeCase(name: name, wakesSleepingThread: wakes) { placement, count, seed in
          var values = [Int64](repeating: 0, count: count)
          var result: Int32 = 0
          onPinnedThread(cpu: placement.posterCPU) {
            result = values.withUnsafeMutableBufferPointer {
              run(
                $0.baseAddress, Int32(count), Self.gap.lowerBound, Self.gap.upperBound,
                UInt32(truncatingIfNeeded: seed), placement.targetCPU)
            }
          }
          precondition(result == 0, "C floor \(name) failed with errno \(result)")
          return WakeSamples(values: values)
        })
    }
    floor(WakeLatencyStudy.floorName, crb_eventfd_epoll_latency)
    floor("C posting floor (mutex queue + eventfd)", crb_posting_latency)
    floor("C pthread condvar", crb_condvar_latency)
    floor("C futex", crb_futex_latency)
    floor("C busy-wait spin", wakes: false, crb_spin_latency)
  }

  /// A Swift case posted from a fresh thread pinned to the poster's CPU. `move` pins the
  /// target before each batch (nil when the probe re-pins the target itself); `post` hands
  /// over work that reports to `probe`.
  private func swiftCase(
    _ name: String, _ probe: WakeProbe, repin: Bool = false, move: ((Int32) throws -> Void)?,
    post: @escaping () -> Void
  ) {
    cases.append(
      WakeCase(name: name, wakesSleepingThread: true) { placement, count, seed in
        try move?(placement.targetCPU)
        probe.begin(count: count, targetCPU: placement.targetCPU, repin: repin)
        var result = WakeSamples(values: [])
        onPinnedThread(cpu: placement.posterCPU) {
          result = probe.measure(gap: Self.gap, seed: seed, post)
        }
        return result
      })
  }

  private func pinTarget(_ cpu: Int32) throws {
    try target.performAndWait { _ = crb_pin_self(cpu) }
  }

  private func pinDescriptorTarget(_ cpu: Int32) throws {
    try descriptorTarget.performAndWait { _ = crb_pin_self(cpu) }
  }

  private func addPeers(samples: Int) {
    let queue = self.queue
    let dispatchProbe = WakeProbe(capacity: samples)
    swiftCase("DispatchQueue.async (serial)", dispatchProbe, repin: true, move: nil) {
      queue.async { dispatchProbe.arrive() }
    }
    let cf = self.cf
    let cfProbe = WakeProbe(capacity: samples)
    let moveCF = { (cpu: Int32) in cf.pin(cpu) }
    swiftCase("CFRunLoopPerformBlock + WakeUp", cfProbe, move: moveCF) {
      cf.post { cfProbe.arrive() }
    }
  }

  private func addLoopCases(samples: Int) throws {
    let loop = target.loop
    let thread = target
    let move = { [unowned self] (cpu: Int32) throws in try pinTarget(cpu) }

    let performProbe = WakeProbe(capacity: samples)
    swiftCase("Loop.perform", performProbe, move: move) {
      try? loop.perform(in: .default) { performProbe.arrive() }
    }
    let residentProbe = WakeProbe(capacity: samples)
    swiftCase("ResidentThread.perform", residentProbe, move: move) {
      try? thread.perform { residentProbe.arrive() }
    }

    let manualProbe = WakeProbe(capacity: samples)
    let source = ManualSource { manualProbe.arrive() }
    try loop.add(source, to: .default)
    cleanups.append { source.invalidate() }
    swiftCase("ManualSource signal + wakeUp", manualProbe, move: move) {
      source.signal()
      loop.wakeUp()
    }

    // The descriptor cases, on a loop whose mode watches descriptors (so it sleeps in
    // epoll_wait), with Loop.perform again on that loop for comparison.
    let descriptorLoop = descriptorTarget.loop
    let moveDescriptorTarget = { [unowned self] (cpu: Int32) throws in
      try pinDescriptorTarget(cpu)
    }
    // The handler stamps first, then drains the eventfd (level-triggered, it must), then
    // lets the poster post again.
    let eventfd = crl_eventfd_create(0)
    let descriptorProbe = WakeProbe(capacity: samples)
    let descriptor = DescriptorSource(fileDescriptor: eventfd) { _, _ in
      let woke = crb_now_ns()
      var value: UInt64 = 0
      _ = read(eventfd, &value, 8)
      descriptorProbe.arrive(wokeAt: woke)
    }
    try descriptorLoop.add(descriptor, to: .default)
    cleanups.append {
      descriptor.invalidate()
      Glibc.close(eventfd)
    }
    swiftCase("DescriptorSource on an eventfd", descriptorProbe, move: moveDescriptorTarget) {
      var one: UInt64 = 1
      _ = write(eventfd, &one, 8)
    }

    let portProbe = WakeProbe(capacity: samples)
    let port = try LoopPort<Int> { _ in portProbe.arrive() }
    try descriptorLoop.add(port, to: .default)
    cleanups.append { port.invalidate() }
    swiftCase("LoopPort.send", portProbe, move: moveDescriptorTarget) { try? port.send(1) }

    let epollProbe = WakeProbe(capacity: samples)
    swiftCase(WakeCases.performWithDescriptors, epollProbe, move: moveDescriptorTarget) {
      try? descriptorLoop.perform(in: .default) { epollProbe.arrive() }
    }
  }

  private func addActorHops(samples: Int) {
    let poster = self.poster
    let pinned = PinnedActor(thread: target)
    let free = DefaultActor()
    for (name, wakes) in [
      ("actor hop onto a resident thread", true), ("actor hop, default executor", false),
    ] {
      let probe = WakeProbe(capacity: samples)
      let move = { [unowned self] (cpu: Int32) throws in try pinTarget(cpu) }
      cases.append(
        WakeCase(name: name, wakesSleepingThread: wakes) { placement, count, seed in
          try move(placement.targetCPU)
          probe.begin(count: count, targetCPU: wakes ? placement.targetCPU : -1, repin: false)
          // The awaiting task runs on the poster thread, pinned like every other poster.
          return await withTaskExecutorPreference(poster.executor) {
            _ = crb_pin_self(placement.posterCPU)
            return await probe.measureAsync(gap: Self.gap, seed: seed) {
              if wakes { await pinned.touch(probe) } else { await free.touch(probe) }
            }
          }
        })
    }
  }
}
