import CBenchBaselines
import CoreFoundation
import Dispatch
import Glibc
import RunLoopKit
import Synchronization

struct TimerScaleResult: Codable {
  let timers: Int
  let addSeconds: Double
  let cancelSeconds: Double
  let fireAllSeconds: Double
  let fired: Int
}

struct LatenessResult: Codable {
  let name: String
  let distribution: Distribution
}

/// A million timers through one mode's heap, and how late a 1 ms repeating timer fires.
enum TimerStudy {
  static func scale(_ options: Options, progress: Progress) throws -> TimerScaleResult {
    let count = options.timerCount
    let thread = try ResidentThread(name: "bench-timers")
    let loop = thread.loop
    let result = try thread.performAndWait { () throws -> TimerScaleResult in
      // Add, then cancel in random order: the heap's O(log n) insert and removal.
      let base = LoopClock.Instant.now.advanced(by: .seconds(3600))
      var random = SplitMix(seed: 5)
      var timers: [LoopTimer] = []
      timers.reserveCapacity(count)
      for _ in 0..<count {
        let date = base.advanced(
          by: .nanoseconds(Int64.random(in: 0..<1_000_000_000, using: &random)))
        timers.append(try LoopTimer(fireAt: date) { _ in })
      }
      var start = crb_now_ns()
      for timer in timers { try loop.add(timer, to: "scale") }
      let add = Double(crb_now_ns() - start) / 1e9
      timers.shuffle(using: &random)
      start = crb_now_ns()
      for timer in timers { timer.invalidate() }
      let cancel = Double(crb_now_ns() - start) / 1e9
      timers.removeAll()

      // Fire all: timers due within the next 10 ms, run until every one has fired.
      let fired = Atomic<Int>(0)
      let soon = LoopClock.Instant.now.advanced(by: .milliseconds(50))
      for _ in 0..<count {
        let date = soon.advanced(by: .nanoseconds(Int64.random(in: 0..<10_000_000, using: &random)))
        try loop.add(
          LoopTimer(fireAt: date) { @Sendable _ in fired.add(1, ordering: .relaxed) }, to: "fire")
      }
      start = crb_now_ns()
      while fired.load(ordering: .relaxed) < count {
        loop.run(in: "fire", for: .seconds(10))
      }
      let fireAll = Double(crb_now_ns() - start) / 1e9
      return TimerScaleResult(
        timers: count, addSeconds: add, cancelSeconds: cancel, fireAllSeconds: fireAll,
        fired: fired.load(ordering: .relaxed))
    }
    thread.stop()
    try thread.join()
    progress.note("timer scale: \(count) timers")
    return result
  }

  /// Lateness of a 1 ms repeating timer: how long after each grid point its handler starts.
  static func lateness(_ options: Options, progress: Progress) throws -> [LatenessResult] {
    let fires = options.timerFires
    var results: [LatenessResult] = []

    do {
      let thread = try ResidentThread(name: "bench-late")
      let log = LatencyLog(capacity: fires)
      try thread.performAndWait {
        let timer = try LoopTimer(after: .milliseconds(1), repeating: .milliseconds(1)) { timer in
          log.record(postedAt: timer.fireDate.nanoseconds)
          if log.recorded >= fires { Loop.current.stop() }
        }
        try thread.loop.add(timer, to: "lateness")
        thread.loop.run(in: "lateness", for: .seconds(60))
        timer.invalidate()
      }
      thread.stop()
      try thread.join()
      results.append(LatenessResult(name: "LoopTimer (1 ms)", distribution: Distribution(log.all)))
    }

    do {
      let log = LatencyLog(capacity: fires)
      let done = DispatchSemaphore(value: 0)
      let cf = CFLoopThread()
      cf.post {
        let timer = CFRunLoopTimerCreateWithHandler(
          nil, CFAbsoluteTimeGetCurrent() + 0.001, 0.001, 0, 0
        ) { timer in
          // Lateness against the fire date being served, converted onto the monotonic clock.
          let late = CFAbsoluteTimeGetCurrent() - CFRunLoopTimerGetNextFireDate(timer)
          log.record(postedAt: crb_now_ns() - Int64(late * 1e9))
          if log.recorded >= fires {
            CFRunLoopTimerInvalidate(timer)
            done.signal()
          }
        }
        CFRunLoopAddTimer(CFRunLoopGetCurrent(), timer, CFRunLoopMode.defaultMode)
      }
      done.wait()
      cf.stop()
      results.append(
        LatenessResult(name: "CFRunLoopTimer (1 ms)", distribution: Distribution(log.all)))
    }

    do {
      let log = LatencyLog(capacity: fires)
      let done = DispatchSemaphore(value: 0)
      let queue = DispatchQueue(label: "bench.timer")
      let timer = DispatchSource.makeTimerSource(queue: queue)
      let first = DispatchTime.now() + .milliseconds(1)
      // Dispatch's uptime clock is CLOCK_MONOTONIC on Linux, the clock crb_now_ns reads.
      let start = Int64(first.uptimeNanoseconds)
      let ticks = Atomic<Int64>(0)
      timer.schedule(deadline: first, repeating: .milliseconds(1), leeway: .nanoseconds(0))
      timer.setEventHandler {
        // `data` counts the grid points this event covers; lateness is against the last one.
        let grid = ticks.add(Int64(timer.data), ordering: .relaxed).newValue
        log.record(postedAt: start + (grid - 1) * 1_000_000)
        if log.recorded >= fires {
          timer.cancel()
          done.signal()
        }
      }
      timer.resume()
      done.wait()
      results.append(
        LatenessResult(name: "DispatchSourceTimer (1 ms)", distribution: Distribution(log.all)))
    }
    progress.note("timer lateness")
    return results
  }
}

extension CFRunLoopMode {
  static var defaultMode: CFRunLoopMode { kCFRunLoopDefaultMode }
}
