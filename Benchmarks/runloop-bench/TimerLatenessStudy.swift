import CBenchBaselines
import CoreFoundation
import Dispatch
import Glibc
import RunLoopKit
import Synchronization

/// How late a timer fires, against what the kernel itself gives: a C timerfd in an epoll set,
/// woken on a 1 ms grid (the floor). Every measured thread starts with Linux's default timer
/// slack, 50 µs, set explicitly: a thread inherits its creator's slack, and the bench's own
/// threads lower theirs to time short gaps (`crb_sleep_ns`). The rows say what the slack was
/// while they were measured. The cases run in interleaved rounds, so drift on a shared
/// machine falls on all of them.
enum TimerLatenessStudy {
  /// Linux's default timer slack.
  static let defaultSlack: Int64 = 50_000
  static let period: Int64 = 1_000_000

  static func run(_ options: Options, progress: Progress) throws -> [LatenessResult] {
    let rounds = options.quick ? 3 : 10
    let perRound = max(20, options.timerFires / rounds)
    let floorThread = try residentThread("bench-floor")
    let futexThread = try residentThread("bench-futex")
    let epollThread = try residentThread("bench-epoll")
    let tolerantThread = try residentThread("bench-tolerant")
    defer {
      for thread in [floorThread, futexThread, epollThread, tolerantThread] {
        thread.stop()
        try? thread.join()
      }
    }
    // Kept open for the whole study: a descriptor in the mode makes the loop sleep in epoll.
    var pipeEnds: [Int32] = [0, 0]
    guard pipe(&pipeEnds) == 0 else { throw CTimerHeapError(code: errno) }
    defer { for end in pipeEnds { close(end) } }
    let reader = DescriptorSource(fileDescriptor: pipeEnds[0]) { _, _ in }
    try epollThread.loop.add(reader, to: "lateness")
    defer { reader.invalidate() }

    var samples: [String: [Int64]] = [:]
    var slack: [String: String] = [:]
    var wakes: [String: (wakes: UInt64, periods: Int)] = [:]
    for round in 0..<rounds {
      var cases: [(String, () throws -> Void)] = [
        (
          floorName,
          {
            samples[floorName, default: []] += try cFloor(on: floorThread, perRound, futex: false)
            slack[floorName] = "50 µs (a timerfd ignores slack)"
          }
        ),
        (
          futexName,
          {
            let batch = try loopTimer(on: futexThread, perRound, tolerance: .zero)
            samples[futexName, default: []] += batch.lateness
            slack[futexName] = batch.slack
          }
        ),
        (
          epollName,
          {
            let batch = try loopTimer(on: epollThread, perRound, tolerance: .zero)
            samples[epollName, default: []] += batch.lateness
            slack[epollName] = batch.slack
          }
        ),
        (
          tolerantName,
          {
            let batch = try loopTimer(on: tolerantThread, perRound, tolerance: .milliseconds(1))
            samples[tolerantName, default: []] += batch.lateness
            slack[tolerantName] = batch.slack
            let sum = wakes[tolerantName] ?? (0, 0)
            wakes[tolerantName] = (sum.wakes + batch.timerWakes, sum.periods + perRound)
          }
        ),
      ]
      // Each round starts with a different case.
      cases = Array(cases[(round % cases.count)...] + cases[..<(round % cases.count)])
      for (_, measure) in cases { try measure() }
    }
    var results = [floorName, futexName, epollName, tolerantName].map { name in
      var result = LatenessResult(
        name: name, distribution: Distribution(samples[name] ?? []), slack: slack[name] ?? "")
      if let counted = wakes[name] {
        result.wakeUpsPerFiring = Double(counted.wakes) / Double(counted.periods)
      }
      return result
    }
    results += try futexContext(on: floorThread, samples: perRound * rounds / 2)
    results += try coalescing(on: tolerantThread, periods: perRound * rounds / 2)
    results += try peers(fires: options.timerFires)
    progress.note("timer lateness")
    return results
  }

  static let floorName = "C timerfd + epoll_wait (floor)"
  static let futexName = "LoopTimer, futex wait"
  static let epollName = "LoopTimer, epoll wait"
  static let tolerantName = "LoopTimer, tolerance 1 ms"
  static let coalescedName = "4 timers 250 µs apart, tolerance 1 ms"
  static let uncoalescedName = "4 timers 250 µs apart, tolerance 0"

  /// A resident thread whose slack is Linux's default before its loop first sleeps.
  private static func residentThread(_ name: String) throws -> ResidentThread {
    let thread = try ResidentThread(name: name)
    try thread.performAndWait { _ = crb_set_timer_slack(defaultSlack) }
    return thread
  }

  static func cFloor(
    on thread: ResidentThread, _ count: Int, futex: Bool, slack: Int64 = defaultSlack
  ) throws -> [Int64] {
    try thread.performAndWait { () throws -> [Int64] in
      let previous = crb_timer_slack()
      _ = crb_set_timer_slack(slack)
      defer { _ = crb_set_timer_slack(previous) }
      var batch = [Int64](repeating: 0, count: count)
      let error =
        futex
        ? crb_futex_lateness(&batch, Int32(count), period)
        : crb_timerfd_lateness(&batch, Int32(count), period)
      guard error == 0 else { throw CTimerHeapError(code: error) }
      return batch
    }
  }

  /// The C futex sleep on the same grid with the default slack and with 1 ns: what the
  /// loop's futex wait would cost if it left its thread's slack alone.
  private static func futexContext(
    on thread: ResidentThread, samples: Int
  ) throws -> [LatenessResult] {
    var defaultSlack: [Int64] = []
    var leastSlack: [Int64] = []
    for round in 0..<4 {
      let half = samples / 4
      if round.isMultiple(of: 2) {
        defaultSlack += try cFloor(on: thread, half, futex: true)
        leastSlack += try cFloor(on: thread, half, futex: true, slack: 1)
      } else {
        leastSlack += try cFloor(on: thread, half, futex: true, slack: 1)
        defaultSlack += try cFloor(on: thread, half, futex: true)
      }
    }
    return [
      LatenessResult(
        name: "C futex wait, slack 50 µs", distribution: Distribution(defaultSlack),
        slack: "50 µs"),
      LatenessResult(
        name: "C futex wait, slack 1 ns", distribution: Distribution(leastSlack), slack: "1 ns"),
    ]
  }

  /// One batch of a 1 ms repeating LoopTimer in the mode "lateness" of `thread`'s loop (which
  /// sleeps in epoll when a descriptor is there): lateness against each grid point, the
  /// thread's slack as the handler saw it, and the waits a timer ended.
  private static func loopTimer(
    on thread: ResidentThread, _ count: Int, tolerance: Duration
  ) throws -> (lateness: [Int64], slack: String, timerWakes: UInt64) {
    let log = LatencyLog(capacity: count)
    let loop = thread.loop
    return try thread.performAndWait { () throws -> ([Int64], String, UInt64) in
      let wakesBefore = loop.metrics.wakes.timer
      let slackSeen = Atomic<Int64>(0)
      let timer = try LoopTimer(
        after: .milliseconds(1), repeating: .milliseconds(1), tolerance: tolerance
      ) { timer in
        log.record(postedAt: timer.fireDate.nanoseconds)
        if log.recorded == 1 { slackSeen.store(crb_timer_slack(), ordering: .relaxed) }
        if log.recorded >= count { Loop.current.stop() }
      }
      try loop.add(timer, to: "lateness")
      loop.run(in: "lateness", for: .seconds(60))
      timer.invalidate()
      let seen = slackSeen.load(ordering: .relaxed)
      let slack = "50 µs at start; \(formatNanoseconds(seen)) once the loop slept"
      return (log.all, slack, loop.metrics.wakes.timer - wakesBefore)
    }
  }

  /// Four 1 ms repeating timers a quarter period apart, with no tolerance and then with 1 ms:
  /// wake-ups per period, and how late each timer fired against its own grid.
  private static func coalescing(
    on thread: ResidentThread, periods: Int
  ) throws -> [LatenessResult] {
    let loop = thread.loop
    return try [Duration.zero, .milliseconds(1)].map { tolerance in
      let log = LatencyLog(capacity: periods * 4)
      let wakes = try thread.performAndWait { () throws -> UInt64 in
        let before = loop.metrics.wakes.timer
        let start = LoopClock.Instant.now.advanced(by: .milliseconds(1))
        let timers = try (0..<4).map { index in
          try LoopTimer(
            fireAt: start.advanced(by: .microseconds(250 * index)), interval: .milliseconds(1),
            tolerance: tolerance
          ) { timer in
            log.record(postedAt: timer.fireDate.nanoseconds)
            if log.recorded >= periods * 4 { Loop.current.stop() }
          }
        }
        for timer in timers { try loop.add(timer, to: "coalescing") }
        loop.run(in: "coalescing", for: .seconds(60))
        for timer in timers { timer.invalidate() }
        return loop.metrics.wakes.timer - before
      }
      var result = LatenessResult(
        name: tolerance == .zero ? uncoalescedName : coalescedName,
        distribution: Distribution(log.all), slack: "50 µs at start; 1 ns once the loop slept")
      result.wakeUpsPerFiring = Double(wakes) / Double(periods)
      return result
    }
  }

  /// CFRunLoopTimer and DispatchSourceTimer on the same grid, for comparison (run once each,
  /// not interleaved; their threads' slack is whatever CF's and Dispatch's threads have).
  private static func peers(fires: Int) throws -> [LatenessResult] {
    var results: [LatenessResult] = []
    do {
      let log = LatencyLog(capacity: fires)
      let done = DispatchSemaphore(value: 0)
      let cf = CFLoopThread()
      cf.post {
        _ = crb_set_timer_slack(defaultSlack)
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
        LatenessResult(
          name: "CFRunLoopTimer (1 ms)", distribution: Distribution(log.all), slack: "50 µs"))
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
        LatenessResult(
          name: "DispatchSourceTimer (1 ms)", distribution: Distribution(log.all),
          slack: "Dispatch's own"))
    }
    return results
  }
}

struct LatenessResult: Codable {
  let name: String
  let distribution: Distribution
  /// The timer slack of the thread measured on.
  var slack = ""
  /// Waits that a timer ended, per firing of the timer (of all four timers, in the
  /// coalescing rows). With a 1 ms tolerance a 1 ms timer fires at the end of its window,
  /// the next grid point, and so every other grid point.
  var wakeUpsPerFiring: Double?
  /// Jobs on Swift's global executor per sleep (the sleep rows).
  var globalJobsPerSleep: Double?
}
