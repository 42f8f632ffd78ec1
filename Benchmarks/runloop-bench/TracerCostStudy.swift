import Glibc
import RunLoopKit
import Synchronization

struct TracerCostResult: Codable {
  let passes: Int
  /// Nanoseconds per pass with no tracer attached, and with one attached.
  let untracedNanosecondsPerPass: Double
  let tracedNanosecondsPerPass: Double
  /// Events the tracer recorded per pass.
  let eventsPerPass: Double
  /// Nanoseconds per pass with a stall watch set (`watchStalls`) and no tracer: what
  /// publishing each callout costs the loop's thread.
  let watchedNanosecondsPerPass: Double
}

/// What a pass costs with and without a `LoopTracer`, and with a stall watch set: a manual
/// source that signals itself makes the loop do back-to-back passes with one callout each and
/// no sleep, the worst case for per-pass overhead. The three cases alternate, three rounds
/// each; medians are reported.
enum TracerCostStudy {
  static func run(_ options: Options, progress: Progress) throws -> TracerCostResult {
    let passes = options.tracerPasses
    var untraced: [Double] = []
    var traced: [Double] = []
    var watched: [Double] = []
    var eventsPerPass = 0.0
    for _ in 0..<3 {
      untraced.append(try timePasses(passes, tracer: nil))
      let tracer = LoopTracer(capacity: 4_096)
      traced.append(try timePasses(passes, tracer: tracer))
      eventsPerPass = Double(tracer.events.count + tracer.dropped) / Double(passes)
      watched.append(try timePasses(passes, tracer: nil, watchingStalls: true))
    }
    progress.note("tracer cost")
    return TracerCostResult(
      passes: passes, untracedNanosecondsPerPass: untraced.sorted()[1],
      tracedNanosecondsPerPass: traced.sorted()[1], eventsPerPass: eventsPerPass,
      watchedNanosecondsPerPass: watched.sorted()[1])
  }

  /// Nanoseconds per pass over `passes` passes on a fresh thread's loop.
  private static func timePasses(
    _ passes: Int, tracer: LoopTracer?, watchingStalls: Bool = false
  ) throws -> Double {
    let result = Atomic<Int>(0)
    let failure = Mutex<(any Error)?>(nil)
    // A plain pthread, so the measured loop is a fresh one with nothing else on it.
    let thread = PosterThread(count: 1) {
      do {
        let loop = Loop.current
        let remaining = Atomic<Int>(passes)
        // The source signals itself from its own callout, so every pass performs it once.
        let slot = Mutex<ManualSource?>(nil)
        let source = ManualSource(label: "pass") {
          if remaining.subtract(1, ordering: .relaxed).newValue > 0 {
            slot.withLock { $0 }?.signal()
          } else {
            Loop.current.stop()
          }
        }
        slot.withLock { $0 = source }
        try loop.add(source, to: .default)
        try tracer?.attach(to: loop)
        // A threshold no callout reaches: the watch's thread wakes once, the loop publishes.
        let watch = watchingStalls ? try loop.watchStalls(longerThan: .seconds(60)) { _ in } : nil
        source.signal()
        let start = LoopClock.Instant.now
        loop.run(in: .default, for: .seconds(60))
        result.store(start.duration(to: .now).nanoseconds, ordering: .relaxed)
        tracer?.detach()
        watch?.cancel()
        slot.withLock { $0 = nil }
        source.invalidate()
      } catch {
        failure.withLock { $0 = error }
      }
    }
    guard thread.creationError == 0 else {
      throw TracerCostError(
        description: "pthread_create failed with error \(thread.creationError)")
    }
    thread.join()
    if let error = failure.withLock({ $0 }) {
      throw TracerCostError(description: "the traced loop failed: \(error)")
    }
    return Double(result.load(ordering: .relaxed)) / Double(passes)
  }
}

struct TracerCostError: Error, CustomStringConvertible {
  let description: String
}

extension Duration {
  var nanoseconds: Int {
    let (seconds, attoseconds) = components
    return Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
  }
}
