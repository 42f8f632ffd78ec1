import Glibc
import RunLoopKit
import Testing

/// A client that lives on its loop and keeps its view: each attempt gets a 30 s timeout armed
/// through the view, and failed attempts are retried after 1, 2, 4 … 64 s of `loop.sleep`.
final class BackoffClient {
  struct TimedOut: Error {}

  private let view: IsolatedLoop
  /// When each attempt began, from the loop's clock.
  private(set) var attempts: [LoopClock.Instant] = []

  /// Call on the loop's thread (in a callout, `asCurrent` or `runTask`).
  init(on loop: Loop) { view = loop.assumeIsolated() }

  /// Sends until `server` answers within the timeout; `server(attempt)` answers after the
  /// delay it returns, or never when it returns nil.
  func fetch(from server: @escaping (Int) -> Duration?) async throws -> Int {
    var backoff = Duration.seconds(1)
    while true {
      attempts.append(view.loop.now)
      do {
        return try await attempt(attempts.count, server)
      } catch is TimedOut {
        try await view.loop.sleep(for: backoff)
        backoff = min(backoff * 2, .seconds(64))
      }
    }
  }

  private func attempt(_ number: Int, _ server: (Int) -> Duration?) async throws -> Int {
    let reply = server(number)
    return try await withUnsafeThrowingContinuation { continuation in
      var done = false
      do {
        let timeout = try view.perform(after: .seconds(30)) {
          guard !done else { return }
          done = true
          continuation.resume(throwing: TimedOut())
        }
        if let reply {
          try view.perform(after: reply) {
            guard !done else { return }
            done = true
            timeout.cancel()
            continuation.resume(returning: number)
          }
        }
      } catch {
        continuation.resume(throwing: error)
      }
    }
  }
}

/// The same client written against `any Clock<Duration>`: its timeout is a race with a sleep
/// on the clock, its backoff a sleep on the clock. `onAttempt` hears each attempt begin.
struct ClockedBackoffClient {
  struct TimedOut: Error {}
  let clock: any Clock<Duration>
  let onAttempt: @Sendable (Int) -> Void

  func fetch(from server: @escaping @Sendable (Int) -> Duration?) async throws -> Int {
    var backoff = Duration.seconds(1)
    var attempt = 0
    while true {
      attempt += 1
      onAttempt(attempt)
      do {
        return try await send(attempt, server)
      } catch is TimedOut {
        try await clock.sleep(for: backoff)
        backoff = min(backoff * 2, .seconds(64))
      }
    }
  }

  private func send(_ number: Int, _ server: @escaping @Sendable (Int) -> Duration?)
    async throws -> Int
  {
    let clock = self.clock
    return try await withThrowingTaskGroup(of: Int.self) { group in
      group.addTask {
        guard let reply = server(number) else {
          try await clock.sleep(for: .seconds(3600 * 24))
          throw CancellationError()
        }
        try await clock.sleep(for: reply)
        return number
      }
      group.addTask {
        try await clock.sleep(for: .seconds(30))
        throw TimedOut()
      }
      defer { group.cancelAll() }
      return try await group.next()!
    }
  }
}

/// The server of both clients: silent for seven attempts, then answers after 5 s.
@Sendable func eighthAttemptAnswers(_ attempt: Int) -> Duration? {
  attempt < 8 ? nil : .seconds(5)
}

/// When each attempt begins: 0, then 30 s of timeout plus 1, 2, 4 … 64 s of backoff each.
let expectedAttemptTimes: [Duration] = [0, 31, 63, 97, 135, 181, 243, 337].map { .seconds($0) }

extension RunLoopKitTests {
  @Suite("VirtualLoop.runTask: async code in virtual time") struct VirtualTasks {
    @Test(
      "106. runTask runs a task on the virtual loop and moves the clock for it: a client with a 30 s timeout and backoff gets the exact virtual times of every attempt, the same on 5 runs"
    )
    func backoffClientInVirtualTime() throws {
      var sequences: [[Duration]] = []
      var wallTimes: [Duration] = []
      for _ in 0..<5 {
        let virtual = VirtualLoop()
        let began = LoopClock.Instant.now
        let (answer, times, current) = try virtual.runTask {
          let client = BackoffClient(on: Loop.current)
          let answer = try await client.fetch(from: eighthAttemptAnswers)
          let start = VirtualLoop.defaultStart
          return (
            answer, client.attempts.map { start.duration(to: $0) }, Loop.current.isVirtualLoop
          )
        }
        wallTimes.append(began.duration(to: .now))
        #expect(answer == 8)
        #expect(current, "Loop.current inside runTask is the virtual loop")
        #expect(times == expectedAttemptTimes)
        #expect(virtual.now == VirtualLoop.defaultStart.advanced(by: .seconds(342)))
        sequences.append(times)
        print(
          "runTask backoff client, attempts at: \(times.map { "\($0)" }.joined(separator: ", "))")
      }
      #expect(Set(sequences.map { "\($0)" }).count == 1)
      print("runTask backoff client: 342 virtual seconds in \(wallTimes) of real time")
      // Generous: speed belongs in the benchmark; this only shows nothing waited in real time.
      #expect(wallTimes.allSatisfy { $0 < .seconds(2) })
    }

    @Test(
      "109. A component taking any Clock<Duration> runs in virtual time with virtual.clock, and on a real loop's timers with loop.clock"
    )
    func clockedClient() throws {
      let virtual = VirtualLoop()
      let clock = virtual.clock
      let attempts = LoopBoundBox([Duration](), loop: virtual.loop)
      let answer = try virtual.runTask {
        let client = ClockedBackoffClient(clock: clock) { _ in
          attempts.value.append(VirtualLoop.defaultStart.duration(to: clock.now))
        }
        return try await client.fetch(from: eighthAttemptAnswers)
      }
      #expect(answer == 8)
      #expect(attempts.value == [0, 31, 63, 97, 135, 181, 243, 337].map { .seconds($0) })
      #expect(virtual.now == VirtualLoop.defaultStart.advanced(by: .seconds(342)))
      #expect(virtual.clock.now == virtual.now)

      // The same clock type on a real resident thread's loop: 20 ms, on its timers.
      let thread = try ResidentThread(name: "clock")
      defer { thread.stop() }
      let real = thread.loop.clock
      let began = real.now
      let fired = Box(false)
      let done = Gate()
      Task(executorPreference: thread.executor) {
        do {
          try await real.sleep(for: .milliseconds(20))
          fired.value = thread.loop.isCurrent
        } catch {}
        done.open()
      }
      #expect(done.wait())
      #expect(fired.value, "resumed on the loop's thread")
      #expect(began.duration(to: real.now) >= .milliseconds(20))
    }

    @Test("109. A sleep on loop.clock ends with CancellationError when its task is cancelled")
    func clockSleepCancels() throws {
      let virtual = VirtualLoop()
      let clock = virtual.clock
      let outcome = try virtual.runTask { () -> String in
        let sleeper = Task(executorPreference: Loop.current.executor) { () -> String in
          do {
            try await clock.sleep(for: .seconds(60))
            return "slept"
          } catch is CancellationError {
            return "cancelled"
          }
        }
        try await clock.sleep(for: .seconds(1))
        sleeper.cancel()
        return try await sleeper.value
      }
      #expect(outcome == "cancelled")
      #expect(virtual.now == VirtualLoop.defaultStart.advanced(by: .seconds(1)))
    }

    @Test("106. runTask rethrows the body's error and returns from a synchronous test")
    func rethrowsBodyError() throws {
      struct Failed: Error, Equatable { let at: Duration }
      let virtual = VirtualLoop()
      #expect(throws: Failed(at: .seconds(5))) {
        try virtual.runTask {
          try await Loop.current.sleep(for: .seconds(5))
          throw Failed(at: VirtualLoop.defaultStart.duration(to: Loop.current.now))
        }
      }
      // The loop is usable after: the clock stays where the task left it.
      #expect(virtual.now == VirtualLoop.defaultStart.advanced(by: .seconds(5)))
      #expect(try virtual.runTask { 7 } == 7)
    }

    @Test(
      "110. A task that waits for something that can never come ends runTask with TaskStalled, cancelled, instead of a hang"
    )
    func stalledTaskThrows() throws {
      let virtual = VirtualLoop()
      let cancelled = Box(false)
      let began = LoopClock.Instant.now
      var caught: VirtualLoop.TaskStalled?
      do {
        _ = try virtual.runTask(waitingAtMost: .milliseconds(200)) {
          try await Loop.current.sleep(for: .seconds(3))
          // A stream nobody feeds.
          let (stream, _) = AsyncStream<Int>.makeStream()
          for await _ in stream {}
          cancelled.value = Task.isCancelled
          return 0
        }
      } catch let error as VirtualLoop.TaskStalled {
        caught = error
      }
      let stall = try #require(caught)
      #expect(stall.elapsed == .seconds(3))
      #expect(stall.reason == .nothingCame(.milliseconds(200)))
      #expect(stall.ended)
      #expect(stall.description.contains("waits for something that can never come"))
      #expect(cancelled.value, "the task was cancelled and ended")
      #expect(began.duration(to: .now) < .seconds(10))
    }

    @Test(
      "110. A task that never ends while timers keep coming ends runTask with TaskStalled after its real-time budget"
    )
    func endlessTaskRunsOutOfBudget() throws {
      let virtual = VirtualLoop()
      var caught: VirtualLoop.TaskStalled?
      do {
        // The backoff client against a server that never answers retries for ever.
        _ = try virtual.runTask(runningAtMost: .milliseconds(300)) {
          try await BackoffClient(on: Loop.current).fetch { _ in nil }
        }
      } catch let error as VirtualLoop.TaskStalled {
        caught = error
      }
      let stall = try #require(caught)
      #expect(stall.reason == .ranTooLong(.milliseconds(300)))
      #expect(stall.ended, "the cancelled task ended (its loop.sleep threw)")
      #expect(stall.elapsed > .seconds(3600), "the clock moved a long way meanwhile")
      #expect(stall.description.contains("runningAtMost:"))
    }

    @Test(
      "110. A task that keeps itself busy without ever waiting (yields in a loop) is stopped by the budget too"
    )
    func busyTaskRunsOutOfBudget() throws {
      let virtual = VirtualLoop()
      var caught: VirtualLoop.TaskStalled?
      do {
        _ = try virtual.runTask(runningAtMost: .milliseconds(200)) { () -> Int in
          var turns = 0
          while !Task.isCancelled {
            turns += 1
            await Task.yield()
          }
          return turns
        }
      } catch let error as VirtualLoop.TaskStalled {
        caught = error
      }
      let stall = try #require(caught)
      #expect(stall.reason == .ranTooLong(.milliseconds(200)))
      #expect(stall.ended)
      #expect(stall.elapsed == .zero, "no time passed: the task never waited")
    }

    @Test(
      "110. A stalled task whose cancellation comes back through another thread has ended when runTask throws"
    )
    func stallWaitsForTheCancellation() throws {
      let helper = try ResidentThread(name: "canceller")
      defer { helper.stop() }
      var caught: VirtualLoop.TaskStalled?
      do {
        let virtual = VirtualLoop()
        let loop = virtual.loop
        _ = try virtual.runTask(waitingAtMost: .milliseconds(100)) { () -> Int in
          let waiter = Box<UnsafeContinuation<Int, Never>?>(nil)
          return await withTaskCancellationHandler {
            await withUnsafeContinuation { waiter.value = $0 }
          } onCancel: {
            // The answer to the cancellation comes from another thread, once the drive
            // waits for it.
            try? helper.perform {
              _ = waitUntil(seconds: 10) { loop.isWaiting }
              try? loop.perform { waiter.value?.resume(returning: -1) }
            }
          }
        }
      } catch let error as VirtualLoop.TaskStalled {
        caught = error
      }
      // The VirtualLoop is gone; a job of the task arriving now would have trapped.
      let stall = try #require(caught)
      #expect(stall.reason == .nothingCame(.milliseconds(100)))
      #expect(stall.ended)
    }

    @Test("110. runTask waits in real time for work another thread brings")
    func outsideWorkArrives() throws {
      let virtual = VirtualLoop()
      let loop = virtual.loop
      let helper = try ResidentThread(name: "helper")
      defer { helper.stop() }
      let value = try virtual.runTask { () -> Int in
        // Another thread answers once runTask waits for it in real time; the virtual clock
        // does not move for it.
        try await withUnsafeThrowingContinuation { continuation in
          do {
            try helper.perform {
              _ = waitUntil(seconds: 10) { loop.isWaiting }
              do {
                try loop.perform { continuation.resume(returning: 42) }
              } catch {
                continuation.resume(throwing: error)
              }
            }
          } catch {
            continuation.resume(throwing: error)
          }
        }
      }
      #expect(value == 42)
      #expect(virtual.now == VirtualLoop.defaultStart)
    }

    @Test(
      "112. The async runTask drives across the caller's suspensions; the caller's cancellation reaches the task"
    )
    func asyncRunTask() async throws {
      let virtual = VirtualLoop()
      let times = try await virtual.runTask {
        let client = BackoffClient(on: Loop.current)
        _ = try await client.fetch(from: eighthAttemptAnswers)
        return client.attempts.map { VirtualLoop.defaultStart.duration(to: $0) }
      }
      #expect(times == expectedAttemptTimes)

      let (started, start) = AsyncStream<Void>.makeStream()
      let waiting = Task {
        try await virtual.runTask(waitingAtMost: .seconds(30)) { () -> Bool in
          let (stream, _) = AsyncStream<Int>.makeStream()
          start.yield()
          for await _ in stream {}
          return Task.isCancelled
        }
      }
      // Cancelled once the body runs on the loop, not before.
      for await _ in started { break }
      waiting.cancel()
      #expect(try await waiting.value, "the body saw its cancellation")
    }
  }
}

extension RunLoopKitTests {
  @Suite("VirtualLoop.runTask: misuse") struct VirtualTaskMisuse {
    @Test("106. runTask called from the task of another runTask on the same loop traps, saying why")
    func nestedRunTaskTraps() async {
      let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
        let virtual = VirtualLoop()
        _ = try virtual.runTask { () -> Int in
          func inner() throws -> Int { try virtual.runTask { 1 } }
          return try inner()
        }
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(message.contains("called from a task or actor running on this virtual loop"))
    }

    @Test("106. runTask in a mode that is not a common mode traps: the task's jobs could not run")
    func privateModeTraps() async {
      let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
        _ = try VirtualLoop().runTask(in: Loop.Mode("private")) { 1 }
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(message.contains("not one of the loop's common modes"))
    }

    @Test("112. Another thread that drives the loop while an async runTask is under way traps")
    func driveDuringAsyncRunTaskTraps() async {
      let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
        let virtual = VirtualLoop()
        let started = Gate()
        let other = TestThread {
          started.wait()
          virtual.advance(by: .seconds(1))
        }
        _ = try await virtual.runTask(waitingAtMost: .seconds(20)) { () -> Int in
          started.open()
          let (stream, _) = AsyncStream<Int>.makeStream()
          for await value in stream { return value }
          return 0
        }
        other.join()
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(message.contains("async runTask between its drives"), "\(message)")
    }
  }
}

extension Loop {
  /// Whether this is a `VirtualLoop`'s loop (its thread description says so).
  fileprivate var isVirtualLoop: Bool { threadDescription == "a VirtualLoop's driving thread" }
}

/// Counts ticks of a repeating timer armed through the view it keeps.
final class ViewKeepingTicker {
  private let view: IsolatedLoop
  private(set) var ticks = 0
  private var timer: LoopTimer?

  init(on loop: Loop) { view = loop.assumeIsolated() }

  func start() throws {
    timer = try view.addTimer(after: .seconds(1), repeating: .seconds(1)) { _ in
      self.ticks += 1
    }
  }

  /// Re-arms through the stored view, from wherever it is called.
  func restart() throws {
    timer?.invalidate()
    try start()
  }
}

extension RunLoopKitTests {
  @Suite("VirtualLoop: views and the forgotten asCurrent") struct VirtualViews {
    @Test(
      "107. A view taken on a virtual loop stays valid whichever thread drives the loop next, and between drives on the thread that goes on"
    )
    func viewFollowsTheDrive() throws {
      let virtual = VirtualLoop()
      let ticker = virtual.asCurrent { ViewKeepingTicker(on: Loop.current) }
      try ticker.start()
      virtual.advance(by: .seconds(2))
      #expect(ticker.ticks == 2)
      // As an async test that resumed on another thread: drive and use the view from there.
      let sendable = HandedOver(ticker)
      let other = TestThread {
        let ticker = sendable.value
        virtual.advance(by: .seconds(1))
        try? ticker.restart()  // between drives, on the thread that drove last
        virtual.advance(by: .seconds(3))
      }
      other.join()
      #expect(ticker.ticks == 6)
      // And back on the first thread.
      try ticker.restart()
      virtual.advance(by: .seconds(1))
      #expect(ticker.ticks == 7)
    }

    @Test("107. A view used on a thread while another thread drives the virtual loop traps")
    func viewUsedDuringAnotherDriveTraps() async {
      let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
        let virtual = VirtualLoop()
        let ticker = virtual.asCurrent { ViewKeepingTicker(on: Loop.current) }
        let driving = Gate()
        let neverOpened = Gate()
        _ = TestThread {
          try? virtual.loop.assumeIsolated().perform {
            driving.open()
            // Holds the drive while the test thread uses the view (the trap ends the process).
            neverOpened.wait(seconds: 60)
          }
          virtual.runUntilIdle()
        }
        driving.wait()
        try ticker.start()
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(message.contains("Another thread drives the VirtualLoop now"), "\(message)")
    }

    @Test(
      "111. advance that finds nothing while the thread's real loop was given timers says once, on standard error, that asCurrent was forgotten"
    )
    func forgottenAsCurrentIsDiagnosed() throws {
      let reports = try onLoopThread { _ -> [String?] in
        let virtual = VirtualLoop()
        var reports: [String?] = []
        // Set up outside asCurrent: Loop.current is the thread's real loop.
        let request = Request()
        try request.send(timeout: .seconds(5))
        virtual.advance(by: .seconds(10))
        reports.append(virtual.strayTimerReport)
        #expect(request.outcome == nil, "the timer went to the real loop")
        return reports
      }
      let report = try #require(reports[0])
      #expect(report.contains("VirtualLoop.advance found nothing to run"))
      #expect(report.contains("1 timer(s)"))
      #expect(report.contains("virtual.asCurrent"))
    }

    @Test("111. No word when the virtual loop did work, or the real loop was given nothing")
    func noFalseDiagnosis() throws {
      let quiet = try onLoopThread { loop -> [String?] in
        // Timers on the real loop from before the VirtualLoop was made do not count.
        try loop.assumeIsolated().perform(after: .seconds(60)) {}
        let virtual = VirtualLoop()
        virtual.advance(by: .seconds(1))
        virtual.runUntilIdle()
        virtual.step()
        let first = virtual.strayTimerReport
        // Work on the virtual loop: advance did something, so no word either.
        let second = VirtualLoop()
        try second.asCurrent { try Request().send(timeout: .seconds(1)) }
        try Request().send(timeout: .seconds(1))  // on the real loop, but the advance worked
        second.advance(by: .seconds(2))
        return [first, second.strayTimerReport]
      }
      #expect(quiet == [nil, nil])
    }

    @Test("111. The word is said once per VirtualLoop")
    func diagnosedOnce() throws {
      let reports = try onLoopThread { _ -> [String?] in
        let virtual = VirtualLoop()
        try Request().send(timeout: .seconds(1))
        virtual.advance(by: .seconds(2))
        let first = virtual.strayTimerReport
        try Request().send(timeout: .seconds(1))
        virtual.step()
        return [first, virtual.strayTimerReport]
      }
      #expect(reports[0] != nil)
      #expect(reports[0] == reports[1], "the second call printed nothing new")
    }
  }
}

/// Carries a non-Sendable value to another thread in a test that hands it over whole.
// Handed over once, and used by one thread at a time (the test joins the thread).
final class HandedOver<Value>: @unchecked Sendable {
  let value: Value
  init(_ value: Value) { self.value = value }
}

/// An actor with no executor of its own: with a task executor preference, its jobs run on the
/// preferred executor (SE-0417).
actor DefaultActorCounter {
  private(set) var ticks: [Duration] = []
  func tick(on loop: Loop) {
    ticks.append(VirtualLoop.defaultStart.duration(to: loop.now))
  }
  func ranOnLoop(_ loop: Loop) -> Bool { loop.isCurrent }
}

/// An actor pinned to a loop's executor.
actor VirtualPinnedCounter {
  let loop: Loop
  private(set) var count = 0
  nonisolated var unownedExecutor: UnownedSerialExecutor {
    loop.executor.asUnownedSerialExecutor()
  }
  init(loop: Loop) { self.loop = loop }
  func bump() async throws -> Duration {
    try await loop.sleep(for: .seconds(2))
    count += 1
    return VirtualLoop.defaultStart.duration(to: loop.now)
  }
}

extension RunLoopKitTests {
  @Suite("VirtualLoop.runTask: what runs on the loop") struct VirtualTaskPlacement {
    @Test(
      "106. Inside runTask, child tasks, task groups, a default actor and an actor pinned to the loop all run on the virtual loop, in virtual time"
    )
    func everythingRunsOnTheLoop() throws {
      let virtual = VirtualLoop()
      let loop = virtual.loop
      let pinned = VirtualPinnedCounter(loop: loop)
      let result = try virtual.runTask { () -> [String] in
        var log: [String] = []
        let counter = DefaultActorCounter()
        log.append("default actor on loop: \(await counter.ranOnLoop(loop))")
        async let first: Void = loop.sleep(for: .seconds(3))
        async let second: Void = loop.sleep(for: .seconds(5))
        _ = try await (first, second)
        await counter.tick(on: loop)
        try await withThrowingTaskGroup(of: Bool.self) { group in
          for seconds in [7, 1, 4] {
            group.addTask {
              try await loop.sleep(for: .seconds(seconds))
              return loop.isCurrent
            }
          }
          for try await onLoop in group { log.append("group child on loop: \(onLoop)") }
        }
        await counter.tick(on: loop)
        log.append("pinned actor woke at \(try await pinned.bump())")
        log.append("ticks \(await counter.ticks)")
        return log
      }
      #expect(
        result == [
          "default actor on loop: true",
          "group child on loop: true", "group child on loop: true", "group child on loop: true",
          "pinned actor woke at 14.0 seconds",
          "ticks [5.0 seconds, 12.0 seconds]",
        ])
      #expect(virtual.now == VirtualLoop.defaultStart.advanced(by: .seconds(14)))
    }

    @Test(
      "110. Inside runTask a descriptor written by another thread ends a wait with no timer ahead; with a timer ahead the clock moves to it instead of waiting for the thread"
    )
    func descriptorFromAnotherThread() throws {
      // No timer ahead: runTask waits in real time, and the read comes at virtual 0.
      let (readEnd, writeEnd) = makePipe()
      defer { close(readEnd) }
      let writer = TestThread {
        usleep(20_000)
        var byte: UInt8 = 42
        _ = write(writeEnd, &byte, 1)
        close(writeEnd)
      }
      defer { writer.join() }
      let virtual = VirtualLoop()
      let got = try virtual.runTask { () -> String in
        try await withUnsafeThrowingContinuation { readOnce(readEnd, timeout: nil, $0) }
      }
      #expect(got == "read 42 at 0.0 seconds")

      // A 30 s timeout ahead: nothing is ready, so the clock moves to it (as tokio's paused
      // clock does); the other thread writes only once runTask has returned.
      let (lateRead, lateWrite) = makePipe()
      defer { close(lateRead) }
      let returned = Gate()
      let lateWriter = TestThread {
        returned.wait()
        var byte: UInt8 = 7
        _ = write(lateWrite, &byte, 1)
        close(lateWrite)
      }
      defer { lateWriter.join() }
      let timed = VirtualLoop()
      let outcome = try timed.runTask { () -> String in
        try await withUnsafeThrowingContinuation {
          readOnce(lateRead, timeout: .seconds(30), $0)
        }
      }
      returned.open()
      #expect(outcome == "timed out at 30.0 seconds")
    }
  }
}

/// Reads one byte from `fd` through a descriptor source of the current loop, or gives up
/// after `timeout` (a timer of the same loop). Synchronous, so it may take the loop's view.
func readOnce(
  _ fd: Int32, timeout: Duration?, _ continuation: UnsafeContinuation<String, any Error>
) {
  do {
    let view = Loop.current.assumeIsolated()
    let loop = view.loop
    var done = false
    var timer: LoopTimer?
    if let timeout {
      timer = try view.addTimer(after: timeout) { _ in
        guard !done else { return }
        done = true
        let at = VirtualLoop.defaultStart.duration(to: loop.now)
        continuation.resume(returning: "timed out at \(at)")
      }
    }
    try view.addSource(fileDescriptor: fd) { source, _ in
      source.invalidate()
      guard !done else { return }
      done = true
      timer?.invalidate()
      var byte: UInt8 = 0
      _ = read(fd, &byte, 1)
      let at = VirtualLoop.defaultStart.duration(to: loop.now)
      continuation.resume(returning: "read \(byte) at \(at)")
    }
  } catch {
    continuation.resume(throwing: error)
  }
}
