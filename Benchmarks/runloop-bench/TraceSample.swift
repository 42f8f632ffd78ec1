import Foundation
import Glibc
import RunLoopKit
import Synchronization

/// `--trace FILE`: a short traced workload written as Chrome Trace Event JSON for Perfetto.
/// It runs after every study, so no measured figure includes a tracer. Two resident threads,
/// each loop traced: "bench-worker" has a 5 ms repeating timer, a port, a manual source and
/// an observer; "bench-poster" feeds the port and posts blocks to the worker, while the main
/// thread signals and wakes the worker's source. A few dozen milliseconds in all.
enum TraceSample {
  static let rounds = 10

  static func write(to path: String) throws {
    let worker = try ResidentThread(name: "bench-worker")
    let poster = try ResidentThread(name: "bench-poster")
    defer {
      worker.stop()
      poster.stop()
      try? worker.join()
      try? poster.join()
    }
    let tracers = [LoopTracer(), LoopTracer()]
    try tracers[0].attach(to: worker.loop)
    try tracers[1].attach(to: poster.loop)
    let handled = Tally()
    let port = try LoopPort<Int>(label: "work") { _ in
      handled.count.add(1, ordering: .relaxed)
    }
    let manual = ManualSource(label: "manual") { handled.count.add(1, ordering: .relaxed) }
    let tick = try LoopTimer(label: "tick", after: .milliseconds(5), repeating: .milliseconds(5)) {
      _ in
    }
    let observer = LoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, _ in }
    defer {
      port.invalidate()
      manual.invalidate()
      tick.invalidate()
      observer.invalidate()
    }
    try worker.loop.add(port, to: .default)
    try worker.loop.add(manual, to: .default)
    try worker.loop.add(tick, to: .default)
    try worker.loop.add(observer, to: .default)
    for round in 0..<rounds {
      try poster.perform {
        try? port.send(round)
        try? worker.perform { handled.count.add(1, ordering: .relaxed) }
      }
      manual.signalAndWake()
      usleep(2_000)  // lets the worker fall asleep between rounds, so each one wakes it
    }
    // Every message, block and signal handled (a signal made while one is pending merges).
    let deadline = LoopClock.Instant.now.advanced(by: .seconds(5))
    while handled.count.load(ordering: .relaxed) < 2 * rounds + 1, LoopClock.Instant.now < deadline
    {
      usleep(1_000)
    }
    for tracer in tracers { tracer.detach() }
    try LoopTracer.chromeTraceJSON(of: tracers, processName: "runloop-bench trace sample")
      .write(toFile: path, atomically: true, encoding: .utf8)
  }
}

/// A count the sample's threads share.
private final class Tally: Sendable {
  let count = Atomic<Int>(0)
}
