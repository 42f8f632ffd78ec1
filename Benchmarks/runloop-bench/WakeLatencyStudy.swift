import CBenchBaselines
import CRunLoopShims
import CoreFoundation
import Dispatch
import Foundation
import Glibc
import RunLoopKit

/// One wake-latency case's result.
struct WakeResult: Codable {
  let name: String
  let distribution: Distribution
  /// p50 divided by the raw C eventfd+epoll p50 of the same run.
  var ratioToFloor: Double = 0
}

/// An actor on the default (global) executor, for comparison with a pinned one.
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

/// A thread running CFRunLoopRun, kept alive by a never-signalled source0.
final class CFLoopThread: @unchecked Sendable {  // `loop` is set before `ready` is signalled
  private(set) var loop: CFRunLoop!
  private let ready = DispatchSemaphore(value: 0)
  private let done = DispatchSemaphore(value: 0)

  init() {
    let thread = Thread { [self] in
      loop = CFRunLoopGetCurrent()
      var context = CFRunLoopSourceContext()
      context.perform = { _ in }
      let source = CFRunLoopSourceCreate(nil, 0, &context)
      CFRunLoopAddSource(loop, source, kCFRunLoopDefaultMode)
      ready.signal()
      CFRunLoopRun()
      done.signal()
    }
    thread.start()
    ready.wait()
  }

  func post(_ block: @escaping () -> Void) {
    CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode as CFTypeRef, block)
    CFRunLoopWakeUp(loop)
  }

  func stop() {
    CFRunLoopStop(loop)
    done.wait()
  }
}

enum WakeLatencyStudy {
  /// Gaps between samples: long enough for the target to be back asleep.
  static let gap: ClosedRange<Int64> = 50_000...150_000

  static func run(_ options: Options, progress: Progress) async throws -> [WakeResult] {
    let count = options.wakeSamples
    var results: [WakeResult] = []
    func add(_ name: String, _ samples: [Int64]) {
      results.append(WakeResult(name: name, distribution: Distribution(samples)))
      progress.note("wake latency: \(name)")
    }
    func cSamples(_ body: (UnsafeMutablePointer<Int64>) -> Int32) -> [Int64] {
      var samples = [Int64](repeating: 0, count: count)
      let result = samples.withUnsafeMutableBufferPointer { body($0.baseAddress!) }
      precondition(result == 0, "baseline failed with errno \(result)")
      return samples
    }

    // Warm up (CPU frequency, the VM's vCPU scheduling, page faults) before the first figure
    // counts: without this the first case measured is consistently slower than later ones.
    _ = cSamples {
      crb_eventfd_epoll_latency($0, Int32(min(count, 2_000)), gap.lowerBound, gap.upperBound, 3)
    }
    add(
      "C eventfd + epoll_wait (floor)",
      cSamples { crb_eventfd_epoll_latency($0, Int32(count), gap.lowerBound, gap.upperBound, 7) })
    add(
      "C pthread condvar",
      cSamples { crb_condvar_latency($0, Int32(count), gap.lowerBound, gap.upperBound, 7) })
    add(
      "C busy-wait spin (any thread)",
      cSamples { crb_spin_latency($0, Int32(count), gap.lowerBound, gap.upperBound, 7) })

    do {
      let queue = DispatchQueue(label: "bench.serial")
      let probe = WakeProbe(count: count)
      add(
        "DispatchQueue.async (serial)", probe.measure(gap: gap) { queue.async { probe.arrive() } })
    }
    do {
      let cf = CFLoopThread()
      let probe = WakeProbe(count: count)
      add(
        "CFRunLoopPerformBlock + WakeUp",
        probe.measure(gap: gap) { cf.post { probe.arrive() } })
      cf.stop()
    }

    let thread = try ResidentThread(name: "bench-target")
    let loop = thread.loop
    do {
      let probe = WakeProbe(count: count)
      add(
        "Loop.perform",
        probe.measure(gap: gap) { try? loop.perform(in: .default) { probe.arrive() } })
    }
    do {
      let probe = WakeProbe(count: count)
      let source = ManualSource { probe.arrive() }
      try loop.add(source, to: .default)
      add(
        "ManualSource signal + wakeUp",
        probe.measure(gap: gap) {
          source.signal()
          loop.wakeUp()
        })
      source.invalidate()
    }
    do {
      let probe = WakeProbe(count: count)
      let efd = crl_eventfd_create(0)
      let source = DescriptorSource(fileDescriptor: efd) { _, _ in
        let woke = crb_now_ns()
        var value: UInt64 = 0
        _ = read(efd, &value, 8)
        probe.arrive(wokeAt: woke)
      }
      try loop.add(source, to: .default)
      add(
        "DescriptorSource on an eventfd",
        probe.measure(gap: gap) {
          var one: UInt64 = 1
          _ = write(efd, &one, 8)
        })
      source.invalidate()
      close(efd)
    }
    do {
      let probe = WakeProbe(count: count)
      let port = try LoopPort<Int> { _ in probe.arrive() }
      try loop.add(port, to: .default)
      add("LoopPort.send", probe.measure(gap: gap) { try? port.send(1) })
      port.invalidate()
    }
    do {
      let probe = WakeProbe(count: count)
      add(
        "ResidentThread.perform",
        probe.measure(gap: gap) { try? thread.perform { probe.arrive() } })
    }
    do {
      let probe = WakeProbe(count: count)
      let actor = PinnedActor(thread: thread)
      add(
        "actor hop onto a resident thread",
        await probe.measureAsync(gap: gap) { await actor.touch(probe) })
    }
    do {
      let probe = WakeProbe(count: count)
      let actor = DefaultActor()
      add(
        "actor hop, default executor",
        await probe.measureAsync(gap: gap) { await actor.touch(probe) })
    }
    thread.stop()
    try thread.join()

    // The floor again, last: on this VM the first case of a run is sometimes slow for reasons
    // outside the process. The ratio uses the lower of the two floor medians, which can only
    // make RunLoopKit's ratios look worse, never better.
    add(
      "C eventfd + epoll_wait (floor, again)",
      cSamples { crb_eventfd_epoll_latency($0, Int32(count), gap.lowerBound, gap.upperBound, 9) })
    let floor = Double(
      min(results[0].distribution.p50, results[results.count - 1].distribution.p50))
    for index in results.indices {
      results[index].ratioToFloor = Double(results[index].distribution.p50) / floor
    }
    return results
  }
}
