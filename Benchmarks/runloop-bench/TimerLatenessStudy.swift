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

    // Each case is measured right after a batch of its own floor (a timerfd sleeping as long
    // between wake-ups), and compared with that batch, round by round, as the wake study
    // does: on this VM the floor itself moves by half between minutes.
    struct Case {
      let name: String
      let thread: ResidentThread
      let tolerance: Duration
      /// How long the case sleeps between wake-ups, and so its floor's period.
      let floorPeriod: Int64
    }
    let cases = [
      Case(name: futexName, thread: futexThread, tolerance: .zero, floorPeriod: period),
      Case(name: epollName, thread: epollThread, tolerance: .zero, floorPeriod: period),
      // A 1 ms timer with 1 ms tolerance fires at the end of its window, the next grid
      // point, which the grid rule then skips: it sleeps 2 ms between wake-ups.
      Case(
        name: tolerantName, thread: tolerantThread, tolerance: .milliseconds(1),
        floorPeriod: 2 * period),
    ]
    var samples: [String: [Int64]] = [:]
    var slack: [String: String] = [:]
    var ratios: [String: (p50: [Double], p99: [Double])] = [:]
    var wakes: [String: (wakes: UInt64, firings: Int)] = [:]
    for round in 0..<rounds {
      // Each round starts with a different case.
      for offset in 0..<cases.count {
        let test = cases[(round + offset) % cases.count]
        let floorName = test.floorPeriod == period ? floorName : slowFloorName
        let floor = try cFloor(on: floorThread, perRound, futex: false, period: test.floorPeriod)
        let batch = try loopTimer(on: test.thread, perRound, tolerance: test.tolerance)
        samples[floorName, default: []] += floor
        samples[test.name, default: []] += batch.lateness
        slack[test.name] = batch.slack
        // Lateness beyond the tolerance, over the floor's.
        let allowed = test.tolerance.components.attoseconds / 1_000_000_000
        let (ours, theirs) = (Distribution(batch.lateness), Distribution(floor))
        var pair = ratios[test.name] ?? ([], [])
        pair.p50.append(Double(ours.p50 - allowed) / Double(theirs.p50))
        pair.p99.append(Double(ours.p99 - allowed) / Double(theirs.p99))
        ratios[test.name] = pair
        let sum = wakes[test.name] ?? (0, 0)
        wakes[test.name] = (sum.wakes + batch.timerWakes, sum.firings + perRound)
      }
    }
    var results = [floorName, futexName, epollName, slowFloorName, tolerantName].map { name in
      var result = LatenessResult(
        name: name, distribution: Distribution(samples[name] ?? []),
        slack: slack[name] ?? "50 µs (a timerfd ignores slack)")
      if let pair = ratios[name] {
        result.floorRatioP50 = medianOf(pair.p50)
        result.floorRatioP99 = medianOf(pair.p99)
      }
      if name == tolerantName, let counted = wakes[name] {
        result.wakeUpsPerFiring = Double(counted.wakes) / Double(counted.firings)
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
  /// The floor for the tolerance row, which sleeps 2 ms between wake-ups (see there): a
  /// longer sleep wakes later on this VM (measured in C: 1 ms timerfd sleeps p50 35–55 µs,
  /// 2 ms sleeps 62–75 µs), so it is compared with a timerfd that sleeps as long.
  static let slowFloorName = "C timerfd + epoll_wait, 2 ms period"
  static let coalescedName = "4 timers 250 µs apart, tolerance 1 ms"
  static let uncoalescedName = "4 timers 250 µs apart, tolerance 0"

  /// A resident thread whose slack is Linux's default before its loop first sleeps.
  private static func residentThread(_ name: String) throws -> ResidentThread {
    let thread = try ResidentThread(name: name)
    try thread.performAndWait { _ = crb_set_timer_slack(defaultSlack) }
    return thread
  }

  static func cFloor(
    on thread: ResidentThread, _ count: Int, futex: Bool, slack: Int64 = defaultSlack,
    period: Int64 = period
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
  /// Median over rounds of this case's p50 (p99) lateness, less its tolerance, over that of a
  /// batch of its floor taken right before it (the rows measured against a floor).
  var floorRatioP50: Double?
  var floorRatioP99: Double?
}
