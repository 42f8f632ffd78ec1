import CBenchBaselines
import Dispatch
import Glibc
import RunLoopKit
import Synchronization

/// One figure of the scaling study, ours and the C floor's, round by round.
struct ScalingFigure: Codable {
  /// Ours and the floor's figure in each round, in the order the rounds ran.
  let ours: [Double]
  let c: [Double]
  /// Whether the C floor ran first in each round (the order alternates between rounds, so
  /// neither side always inherits the other's caches and allocator state).
  let cFirst: [Bool]
  /// Medians over the rounds.
  let oursMedian: Double
  let cMedian: Double
  /// Ours over the floor's within each round (the two ran back to back, so drift falls on
  /// both): the median, the lowest and the highest round.
  let ratio: Double
  let lowestRatio: Double
  let highestRatio: Double

  init(_ rounds: [(ours: Double, c: Double, cFirst: Bool)]) {
    ours = rounds.map(\.ours)
    c = rounds.map(\.c)
    cFirst = rounds.map(\.cFirst)
    oursMedian = medianOf(ours)
    cMedian = medianOf(c)
    let ratios = rounds.map { $0.c > 0 ? $0.ours / $0.c : .infinity }.sorted()
    ratio = medianOf(ratios)
    lowestRatio = ratios.first ?? 0
    highestRatio = ratios.last ?? 0
  }
}

/// Many manual sources on one loop, signalled at random (libuv's benchmark-million-async).
struct ManualSourceScaling: Codable {
  let sources: Int
  /// Perform callbacks run per second while one thread signals as fast as it can.
  let eventsPerSecond: ScalingFigure
  /// `signalAndWake()` calls (C: sends) the signalling thread made per second.
  let signalsPerSecond: ScalingFigure
  /// The loop's passes per second meanwhile (`loop.metrics.passes`; C: turns of its loop, each
  /// a take of the ready list): events over passes is how much one pass did.
  let passesPerSecond: ScalingFigure
  /// Making a source and adding it (C: allocating a handle and linking it in), per source.
  let setupNanosecondsPerSource: ScalingFigure
  /// Invalidating every source and then freeing them (C: unlinking and freeing), per source.
  let closeNanosecondsPerSource: ScalingFigure
}

/// Round trips per second over socketpairs, the near ends on the measured loop.
struct PingPongScaling: Codable {
  let pairs: Int
  let roundTripsPerSecond: ScalingFigure
}

/// Whether a loop's cost follows the work that is ready rather than what it holds, row by row
/// against a C floor of the same shape measured in the same rounds.
struct ScalingResult: Codable {
  let rounds: Int
  /// How long the manual-source rows signal for, and how long the other windowed rows count.
  let signalWindowSeconds: Double
  let windowSeconds: Double
  let manualSources: [ManualSourceScaling]
  /// Loop passes per second when every pass has one callback ready (C: `epoll_wait` with
  /// timeout 0 and one callback per iteration).
  let busyPassesPerSecond: ScalingFigure
  /// Nanoseconds per `loop.run(in:for: .zero)` (C: per `epoll_wait` with timeout 0).
  let zeroLengthRunNanoseconds: ScalingFigure
  /// The two rows above with one idle descriptor source in the mode: the loop's look is then an
  /// `epoll_wait(0)` too (a mode with none makes no syscall to look, as libuv with no watcher).
  let busyPassesWithDescriptorPerSecond: ScalingFigure
  let zeroLengthRunWithDescriptorNanoseconds: ScalingFigure
  let pingPong: [PingPongScaling]
}

/// The scaling study (`--only scaling`): four shapes from libuv's benchmarks, each against its
/// C floor (`CBenchScaling.h`) in the same process run, ours and C back to back in every
/// round, which goes first alternating between rounds.
///
/// The manual-source rows end by time, not by a count of events: a loop whose pass walks every
/// source performs only tens of events a second at a million sources, and the row must still
/// end when its window does (the signalling thread then waits at most one pass for its last
/// `signalAndWake()`, and the stop for one more).
enum ScalingStudy {
  /// How long a windowed row lets the loop run after its first counted event before the window
  /// opens (first passes fault pages in), as the C floors do (`WARM_UP_NS`).
  static let warmUpNanoseconds: Int64 = 20_000_000

  /// Where the manual-source rows' two threads run: the signalling thread on CPU 0 and the
  /// measured loop on CPU 1, on both sides, as the wake study's "different CPUs" placement.
  /// Unpinned, the scheduler sometimes put both on one CPU for a whole window (a wake-up pulls
  /// the woken thread next to its waker), and a row's rounds then differed by up to 37× (the
  /// C floor's) or ran in another regime altogether (ours). The ping-pong's two ends share
  /// CPU 1 instead: libuv runs both ends on one loop, and across CPUs one pair's round trip is
  /// two inter-processor wakes of an idle vCPU, which hides the loop's own cost. The
  /// single-threaded rows (passes, zero-length runs) run unpinned.
  static let senderCPU = Placement.available.contains(.crossCPU) ? Placement.crossCPU.posterCPU : -1
  static let loopCPU = Placement.available.contains(.crossCPU) ? Placement.crossCPU.targetCPU : -1

  static func run(_ options: Options, progress: Progress) throws -> ScalingResult {
    let counts = options.scalingSourceCounts
    let pairCounts = [1, 10, 100]
    let rounds = options.scalingRounds
    let signalWindow = Int64(options.scalingSignalWindowSeconds * 1e9)
    let window = Int64(options.scalingWindowSeconds * 1e9)

    typealias Round = (ours: Double, c: Double, cFirst: Bool)
    var events = [[Round]](repeating: [], count: counts.count)
    var signals = events
    var passes = events
    var setup = events
    var close = events
    var busy: [Round] = []
    var zero: [Round] = []
    var busyWithDescriptor: [Round] = []
    var zeroWithDescriptor: [Round] = []
    var pingPong = [[Round]](repeating: [], count: pairCounts.count)

    for round in 0..<rounds {
      let cFirst = round % 2 == 1
      for (index, count) in counts.enumerated() {
        let seed = UInt64(1_000 * round + index + 1)
        // This thread signals: pinned for the row, then free again for the rows after it.
        _ = crb_pin_self(senderCPU)
        defer { _ = crb_pin_self(-1) }
        let (ours, c) = try inOrder(cFirst) {
          try manualSources(count, window: signalWindow, seed: seed)
        } c: {
          try cHandles(count, window: signalWindow, seed: seed)
        }
        events[index].append((ours.eventsPerSecond, c.eventsPerSecond, cFirst))
        signals[index].append((ours.signalsPerSecond, c.signalsPerSecond, cFirst))
        passes[index].append((ours.passesPerSecond, c.passesPerSecond, cFirst))
        setup[index].append((ours.setupPerSource, c.setupPerSource, cFirst))
        close[index].append((ours.closePerSource, c.closePerSource, cFirst))
      }
      for withDescriptor in [false, true] {
        let busyRates = try inOrder(cFirst) {
          try busyPasses(window: window, idleDescriptor: withDescriptor).perSecond
        } c: {
          try cWindowed("crb_busy_passes") { crb_busy_passes(window, $0, $1) }.perSecond
        }
        let runs = try inOrder(cFirst) {
          try zeroLengthRuns(window: window, idleDescriptor: withDescriptor).nanosecondsEach
        } c: {
          try cWindowed("crb_zero_timeout_waits") {
            crb_zero_timeout_waits(window, $0, $1)
          }.nanosecondsEach
        }
        if withDescriptor {
          busyWithDescriptor.append((busyRates.ours, busyRates.c, cFirst))
          zeroWithDescriptor.append((runs.ours, runs.c, cFirst))
        } else {
          busy.append((busyRates.ours, busyRates.c, cFirst))
          zero.append((runs.ours, runs.c, cFirst))
        }
      }
      for (index, pairs) in pairCounts.enumerated() {
        let trips = try pingPongRound(pairs: pairs, window: window, cFirst: cFirst)
        pingPong[index].append((trips.ours, trips.c, cFirst))
      }
      progress.note("scaling: round \(round + 1) of \(rounds)")
    }

    return ScalingResult(
      rounds: rounds, signalWindowSeconds: options.scalingSignalWindowSeconds,
      windowSeconds: options.scalingWindowSeconds,
      manualSources: counts.indices.map { index in
        ManualSourceScaling(
          sources: counts[index], eventsPerSecond: ScalingFigure(events[index]),
          signalsPerSecond: ScalingFigure(signals[index]),
          passesPerSecond: ScalingFigure(passes[index]),
          setupNanosecondsPerSource: ScalingFigure(setup[index]),
          closeNanosecondsPerSource: ScalingFigure(close[index]))
      },
      busyPassesPerSecond: ScalingFigure(busy),
      zeroLengthRunNanoseconds: ScalingFigure(zero),
      busyPassesWithDescriptorPerSecond: ScalingFigure(busyWithDescriptor),
      zeroLengthRunWithDescriptorNanoseconds: ScalingFigure(zeroWithDescriptor),
      pingPong: pairCounts.indices.map { index in
        PingPongScaling(
          pairs: pairCounts[index], roundTripsPerSecond: ScalingFigure(pingPong[index]))
      })
  }

  /// Runs both sides back to back, the C floor first when `cFirst`.
  private static func inOrder<T>(
    _ cFirst: Bool, ours: () throws -> T, c: () throws -> T
  ) rethrows -> (ours: T, c: T) {
    if cFirst {
      let floor = try c()
      return (try ours(), floor)
    }
    let measured = try ours()
    return (measured, try c())
  }

  // MARK: Manual sources at scale

  /// What one side of a manual-source row measured.
  struct ManySources {
    let eventsPerSecond: Double
    let signalsPerSecond: Double
    let passesPerSecond: Double
    let setupPerSource: Double
    let closePerSource: Double
  }

  /// `count` manual sources in `.default` on a fresh thread's loop, made and added there
  /// (timed); this thread then calls `signalAndWake()` on sources drawn at random, one at a
  /// time, reading the clock after each, until `window` has passed; the loop thread then
  /// invalidates every source and drops them (timed).
  private static func manualSources(
    _ count: Int, window: Int64, seed: UInt64
  ) throws -> ManySources {
    let performed = TaskCounter()
    let made = Mutex<[ManualSource]>([])
    let costs = Mutex<(setup: Int64, close: Int64)>((0, 0))
    let sent = try withBareLoop(on: loopCPU) { loop in
      var sources: [ManualSource] = []
      sources.reserveCapacity(count)
      let start = crb_now_ns()
      for _ in 0..<count {
        let source = ManualSource(label: nil, order: 0) { performed.increment() }
        try loop.add(source, to: .default)
        sources.append(source)
      }
      let setup = crb_now_ns() - start
      costs.withLock { $0.setup = setup }
      made.withLock { $0 = sources }
      return {
        made.withLock { $0 = [] }
        let start = crb_now_ns()
        for source in sources { source.invalidate() }
        // The last references: the sources are freed here, as the C floor frees its handles.
        sources = []
        let close = crb_now_ns() - start
        costs.withLock { $0.close = close }
      }
    } while: { loop in
      signalAtRandom(made.withLock { $0 }, loop: loop, window: window, seed: seed, performed)
    }
    let (setup, close) = costs.withLock { $0 }
    let seconds = Double(sent.elapsed) / 1e9
    return ManySources(
      eventsPerSecond: Double(sent.events) / seconds,
      signalsPerSecond: Double(sent.signals) / seconds,
      passesPerSecond: Double(sent.passes) / seconds,
      setupPerSource: Double(setup) / Double(count), closePerSource: Double(close) / Double(count))
  }

  /// Signals sources drawn at random as fast as it can until `window` has passed; the events
  /// performed and the signals sent meanwhile, and the time that took.
  private static func signalAtRandom(
    _ sources: [ManualSource], loop: Loop, window: Int64, seed: UInt64,
    _ performed: TaskCounter
  ) -> (events: Int, signals: Int, passes: UInt64, elapsed: Int64) {
    // The window opens once the loop is inside its run, as the C floor's once its loop runs.
    while loop.currentMode == nil { crb_sleep_ns(100_000) }
    var random = SplitMix(seed: seed)
    let count = UInt64(sources.count)
    let before = performed.value
    let passesBefore = loop.metrics.passes
    let start = crb_now_ns()
    let deadline = start + window
    var now = start
    var signals = 0
    repeat {
      // The high half of a full-width product: a number below `count`, as the C floor draws.
      sources[Int(random.next().multipliedFullWidth(by: count).high)].signalAndWake()
      signals += 1
      now = crb_now_ns()
    } while now < deadline
    let events = performed.value - before
    return (events, signals, loop.metrics.passes - passesBefore, now - start)
  }

  /// The C floor of the manual-source rows (`crb_async_handles`).
  private static func cHandles(_ count: Int, window: Int64, seed: UInt64) throws -> ManySources {
    var figures = crb_async_figures()
    let error = crb_async_handles(Int32(count), window, seed, loopCPU, &figures)
    guard error == 0 else { throw ScalingError(floor: "crb_async_handles", code: error) }
    let seconds = Double(figures.window_ns) / 1e9
    return ManySources(
      eventsPerSecond: Double(figures.events) / seconds,
      signalsPerSecond: Double(figures.sends) / seconds,
      passesPerSecond: Double(figures.passes) / seconds,
      setupPerSource: Double(figures.setup_ns) / Double(count),
      closePerSource: Double(figures.close_ns) / Double(count))
  }

  // MARK: Passes, zero-length runs

  /// A count over a window.
  struct Windowed {
    let count: Int64
    let elapsed: Int64
    var perSecond: Double { Double(count) / (Double(elapsed) / 1e9) }
    var nanosecondsEach: Double { Double(elapsed) / Double(count) }
  }

  /// A manual source that signals itself from its perform, so every pass performs it once and
  /// the loop never sleeps; passes counted over the window. With `idleDescriptor`, the mode
  /// also watches a pipe nobody writes, so every pass looks at the kernel.
  private static func busyPasses(window: Int64, idleDescriptor: Bool) throws -> Windowed {
    let passes = TaskCounter()
    return try withBareLoop(on: -1) { loop in
      let slot = SourceSlot()
      let source = ManualSource(label: nil, order: 0) {
        passes.increment()
        slot.source?.signal()
      }
      slot.source = source
      try loop.add(source, to: .default)
      let idle = idleDescriptor ? try IdlePipe(on: loop) : nil
      source.signal()
      return {
        slot.source = nil
        source.invalidate()
        idle?.close()
      }
    } while: { _ in
      try sampleWindow(passes, window: window)
    }
  }

  /// `loop.run(in: .default, for: .zero)` over and over on a fresh thread's loop, whose mode
  /// holds one manual source that is never signalled (and with `idleDescriptor` a pipe nobody
  /// writes), in batches of 1 024 until `window` has passed (the first batch untimed, as the C
  /// floor's).
  private static func zeroLengthRuns(window: Int64, idleDescriptor: Bool) throws -> Windowed {
    let outcome = Mutex<Result<Windowed, ScalingError>?>(nil)
    let thread = PosterThread(count: 1) {
      let loop = Loop.current
      let idle = ManualSource(label: nil, order: 0) {}
      let pipe: IdlePipe?
      do {
        try loop.add(idle, to: .default)
        pipe = idleDescriptor ? try IdlePipe(on: loop) : nil
      } catch {
        outcome.withLock { $0 = .failure(ScalingError(description: "adding a source: \(error)")) }
        return
      }
      defer { pipe?.close() }
      for _ in 0..<1_024 { loop.run(in: .default, for: .zero) }
      var runs: Int64 = 0
      let start = crb_now_ns()
      var now = start
      repeat {
        for _ in 0..<1_024 { loop.run(in: .default, for: .zero) }
        runs += 1_024
        now = crb_now_ns()
      } while now - start < window
      idle.invalidate()
      let measured = Windowed(count: runs, elapsed: now - start)
      outcome.withLock { $0 = .success(measured) }
    }
    guard thread.creationError == 0 else {
      throw ScalingError(description: "pthread_create failed with error \(thread.creationError)")
    }
    thread.join()
    guard let outcome = outcome.withLock({ $0 }) else {
      throw ScalingError(description: "the zero-length runs' thread recorded nothing")
    }
    return try outcome.get()
  }

  /// A windowed C floor: `body` gets the count and the elapsed time to fill in.
  private static func cWindowed(
    _ name: String,
    _ body: (UnsafeMutablePointer<Int64>, UnsafeMutablePointer<Int64>) -> Int32
  ) throws -> Windowed {
    var count: Int64 = 0
    var elapsed: Int64 = 0
    let error = body(&count, &elapsed)
    guard error == 0 else { throw ScalingError(floor: name, code: error) }
    return Windowed(count: count, elapsed: elapsed)
  }

  // MARK: Ping-pong

  /// One round of the ping-pong with `pairs` socketpairs: one message per pair in flight, the
  /// far ends echoed by one C thread (`crb_echo_start`) that both near sides share, the near
  /// ends served by our loop and by the C floor in turn, on the same pairs (the messages in
  /// flight carry over); both ends on `loopCPU`. Round trips per second for each.
  private static func pingPongRound(
    pairs: Int, window: Int64, cFirst: Bool
  ) throws -> (ours: Double, c: Double) {
    var near = [Int32](repeating: -1, count: pairs)
    var far = [Int32](repeating: -1, count: pairs)
    var error = crb_pingpong_open(Int32(pairs), &near, &far)
    guard error == 0 else { throw ScalingError(floor: "crb_pingpong_open", code: error) }
    defer { crb_pingpong_close(Int32(pairs), near, far) }
    var echo: OpaquePointer?
    error = crb_echo_start(far, Int32(pairs), loopCPU, &echo)
    guard error == 0 else { throw ScalingError(floor: "crb_echo_start", code: error) }
    defer { crb_echo_stop(echo) }
    let ends = near
    return try inOrder(cFirst) {
      try descriptorSourceNearSide(ends, window: window).perSecond
    } c: {
      try cWindowed("crb_pingpong_near") {
        crb_pingpong_near(ends, Int32(pairs), loopCPU, window, $0, $1)
      }.perSecond
    }
  }

  /// The near ends on a fresh thread's loop, a `DescriptorSource` each whose handler reads the
  /// message and writes it back; round trips (reads that returned data) counted over the window.
  private static func descriptorSourceNearSide(_ near: [Int32], window: Int64) throws -> Windowed {
    let trips = TaskCounter()
    return try withBareLoop(on: loopCPU) { loop in
      var sources: [DescriptorSource] = []
      for fd in near {
        let source = DescriptorSource(fileDescriptor: fd, interest: .readable) { source, _ in
          let got = withUnsafeTemporaryAllocation(byteCount: 64, alignment: 1) { buffer in
            let got = read(fd, buffer.baseAddress, buffer.count)
            if got > 0 { _ = write(fd, buffer.baseAddress, got) }
            return got
          }
          if got > 0 {
            trips.increment()
          } else if got == 0 || (errno != EAGAIN && errno != EINTR) {
            source.invalidate()
          }
        }
        do {
          try loop.add(source, to: .default)
        } catch {
          for added in sources { added.invalidate() }
          throw error
        }
        sources.append(source)
      }
      return { for source in sources { source.invalidate() } }
    } while: { _ in
      try sampleWindow(trips, window: window)
    }
  }

  // MARK: Helpers

  /// Waits for the first counted event, lets the loop run `warmUpNanoseconds` more, then counts
  /// over `window`: what the C floors' `sample_window` does (which also gives up after 5 s
  /// without a first event, so a row that never starts cannot hang the bench).
  private static func sampleWindow(_ counter: TaskCounter, window: Int64) throws -> Windowed {
    let giveUp = crb_now_ns() + 5_000_000_000
    while counter.value == 0 {
      guard crb_now_ns() < giveUp else {
        throw ScalingError(description: "the loop counted no event within 5 s")
      }
      crb_sleep_ns(100_000)
    }
    crb_sleep_ns(warmUpNanoseconds)
    let start = crb_now_ns()
    let before = counter.value
    crb_sleep_ns(window)
    let end = crb_now_ns()
    let after = counter.value
    return Windowed(count: Int64(after - before), elapsed: end - start)
  }

  /// Runs `setup` on a fresh pthread's own loop (`Loop.current`, nothing else on it), pinned to
  /// `cpu` (-1: any), then that loop in `.default` with no deadline while `body` runs on this
  /// thread; then stops the loop and runs, on its thread, the teardown `setup` returned.
  /// Returns what `body` returned.
  private static func withBareLoop<R>(
    on cpu: Int32,
    _ setup: @escaping @Sendable (Loop) throws -> () -> Void,
    while body: (Loop) throws -> R
  ) throws -> R {
    let published = Mutex<Loop?>(nil)
    let failure = Mutex<String?>(nil)
    let finished = Atomic<Bool>(false)
    let left = Atomic<Bool>(false)
    let ready = DispatchSemaphore(value: 0)
    let thread = PosterThread(count: 1) {
      _ = crb_pin_self(cpu)
      let loop = Loop.current
      let teardown: () -> Void
      do {
        teardown = try setup(loop)
      } catch {
        failure.withLock { $0 = "setting up the loop failed: \(error)" }
        ready.signal()
        return
      }
      published.withLock { $0 = loop }
      ready.signal()
      while !finished.load(ordering: .acquiring) { loop.run(in: .default) }
      left.store(true, ordering: .releasing)
      teardown()
    }
    guard thread.creationError == 0 else {
      throw ScalingError(description: "pthread_create failed with error \(thread.creationError)")
    }
    ready.wait()
    guard let loop = published.withLock({ $0 }) else {
      thread.join()
      throw ScalingError(description: failure.withLock { $0 } ?? "the loop's thread failed")
    }
    let outcome = Result { try body(loop) }
    finished.store(true, ordering: .releasing)
    // A stop made while the loop is between two runs is dropped, as in CF: repeat it until
    // the thread has left its loop.
    while !left.load(ordering: .acquiring) {
      loop.stop()
      crb_sleep_ns(1_000_000)
    }
    thread.join()
    return try outcome.get()
  }
}

/// A manual source's reference to itself, so its perform can signal it again: written on the
/// loop's thread before the first signal and read only by the perform, on that thread.
private final class SourceSlot: @unchecked Sendable {
  var source: ManualSource?
}

struct ScalingError: Error, CustomStringConvertible {
  let description: String

  init(description: String) { self.description = description }

  init(floor: String, code: Int32) {
    description = "the C floor \(floor) failed: \(String(cString: strerror(code)))"
  }
}

extension Report {
  /// The scaling section: every row with ours, C's and the ratio, then how flat each side's
  /// manual-source curve is.
  func printScaling() {
    guard let scaling else { return }
    let window = fixed(scaling.signalWindowSeconds, 1)
    print("\nScaling (cost follows ready work): each row against a C floor of the same shape")
    print(
      """
      \(scaling.rounds) rounds, ours and C back to back in each, C first in every other round; \
      ours and C: medians over rounds; ratio: ours / C within a round, median (lowest–highest \
      round). For a rate (/s) a ratio above 1 is faster than C; for a cost (ns), slower.
      Manual sources: a thread calls signalAndWake() on sources drawn at random, one at a time, \
      for \(window) s (C: handles with an atomic pending flag, a lock-free ready list and an \
      eventfd wake). Passes, ping-pong: counted over \(fixed(scaling.windowSeconds, 1)) s \
      (C: an epoll_wait loop; the ping-pong's far ends are one C echo thread for both).
      Placement: manual sources: the signalling thread on CPU 0, the loop on CPU 1; ping-pong: \
      both ends on CPU 1 (one CPU, as libuv's one loop); passes, zero-length runs: unpinned.
      """)
    print(
      "\n" + pad("case", 66) + pad("ours", 12, right: true) + pad("C", 12, right: true)
        + pad("ratio", 8, right: true) + pad("(rounds)", 13, right: true))
    func row(_ name: String, _ figure: ScalingFigure, _ format: (Double) -> String) {
      print(
        pad(name, 66) + pad(format(figure.oursMedian), 12, right: true)
          + pad(format(figure.cMedian), 12, right: true)
          + pad(fixed(figure.ratio, 2), 8, right: true)
          + pad(fixed(figure.lowestRatio, 2) + "–" + fixed(figure.highestRatio, 2), 13, right: true)
      )
    }
    for scale in scaling.manualSources {
      let name = "\(grouped(scale.sources)) manual sources"
      row("\(name): events performed/s", scale.eventsPerSecond, formatRate)
      row("\(name): signalAndWake() calls/s (C: sends/s)", scale.signalsPerSecond, formatRate)
      row(
        "\(name): loop passes/s meanwhile (C: ready-list takes/s)", scale.passesPerSecond,
        formatRate)
      row("\(name): setup (make + add), per source", scale.setupNanosecondsPerSource) {
        formatNanoseconds($0)
      }
      row("\(name): close (invalidate + free), per source", scale.closeNanosecondsPerSource) {
        formatNanoseconds($0)
      }
    }
    row(
      "loop passes/s, every pass performs a self-signalling source", scaling.busyPassesPerSecond,
      formatRate)
    row(
      "zero-length run(in:for: .zero), per run (C: one epoll_wait(0))",
      scaling.zeroLengthRunNanoseconds
    ) { formatNanoseconds($0) }
    row(
      "loop passes/s as above, one idle descriptor in the mode",
      scaling.busyPassesWithDescriptorPerSecond,
      formatRate)
    row(
      "zero-length run as above, one idle descriptor in the mode",
      scaling.zeroLengthRunWithDescriptorNanoseconds
    ) { formatNanoseconds($0) }
    for pingPong in scaling.pingPong {
      row(
        "ping-pong, \(pingPong.pairs) socketpair\(pingPong.pairs == 1 ? "" : "s"): round trips/s",
        pingPong.roundTripsPerSecond, formatRate)
    }
    if let first = scaling.manualSources.first, let last = scaling.manualSources.last,
      last.sources > first.sources
    {
      let ours = last.eventsPerSecond.oursMedian / first.eventsPerSecond.oursMedian
      let c = last.eventsPerSecond.cMedian / first.eventsPerSecond.cMedian
      print(
        "\nevents/s at \(grouped(last.sources)) sources over events/s at \(grouped(first.sources)): "
          + "ours \(formatRatio(ours)), C \(formatRatio(c))")
    }
  }
}

/// A rate for a table: 34.2 /s, 12.3 k/s, 4.56 M/s.
func formatRate(_ value: Double) -> String {
  if value < 1_000 { return fixed(value, 1) + " /s" }
  if value < 1_000_000 { return fixed(value / 1_000, 1) + " k/s" }
  return fixed(value / 1_000_000, 2) + " M/s"
}

/// A ratio that may be far below 1: 0.93×, or 1.2e-05× for what no fixed decimals show.
func formatRatio(_ value: Double) -> String {
  if value >= 0.01 || value == 0 { return fixed(value, 2) + "×" }
  let exponent = Int(floor(log10(value)))
  var scale = 1.0
  for _ in 0..<(-exponent) { scale *= 10 }
  return fixed(value * scale, 1) + "e\(exponent)×"
}

/// 1048576 → "1 048 576".
func grouped(_ value: Int) -> String {
  var digits = String(value)
  var groups: [Substring] = []
  while digits.count > 3 {
    groups.insert(Substring(digits.suffix(3)), at: 0)
    digits.removeLast(3)
  }
  groups.insert(Substring(digits), at: 0)
  return groups.joined(separator: " ")
}
