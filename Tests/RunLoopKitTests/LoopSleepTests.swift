import CRunLoopShims
import Foundation
import RunLoopKitProbes
import Testing

@testable import RunLoopKit

/// An actor whose jobs all run on a resident thread's loop, sleeping with `thread.sleep`.
actor LoopSleeper {
  let thread: ResidentThread
  nonisolated var unownedExecutor: UnownedSerialExecutor {
    thread.executor.asUnownedSerialExecutor()
  }
  init(thread: ResidentThread) { self.thread = thread }

  /// Sleeps 10 minutes unless something ends the sleep first; returns what it threw.
  func sleepUntilEnded() async -> (any Error)? {
    do {
      try await thread.sleep(for: .seconds(600))
      return nil
    } catch {
      return error
    }
  }

  /// Sleeps `times` times for 2 ms; returns the threads it ran on before and after each, and
  /// the global jobs counted meanwhile (`GlobalJobCounter` watching the loop's thread).
  func sleep(times: Int) async throws -> (threads: [pid_t], globalJobs: Int) {
    var threads = [crl_gettid()]
    let before = GlobalJobCounter.count
    for _ in 0..<times {
      try await thread.sleep(for: .milliseconds(2))
      threads.append(crl_gettid())
    }
    return (threads, GlobalJobCounter.count - before)
  }
}

/// The actor of *Swift concurrency on a run loop*'s `loop.sleep` section, as written there.
actor Poller {
  let thread: ResidentThread
  nonisolated var unownedExecutor: UnownedSerialExecutor {
    thread.executor.asUnownedSerialExecutor()
  }
  init(thread: ResidentThread) { self.thread = thread }

  func pollThreeTimes() async throws -> Int {
    var polls = 0
    for _ in 0..<3 {
      try await thread.sleep(for: .milliseconds(5), tolerance: .milliseconds(1))
      polls += 1  // still on the resident thread, isolated to the actor
    }
    return polls
  }
}

/// Timers in `mode`, as the loop counts them (a common-mode timer counts in each common mode).
func timerCount(of loop: Loop, in mode: Loop.Mode = .default) -> Int {
  loop.lock.withLock { loop.modeStates[mode]?.timerCount ?? 0 }
}

extension RunLoopKitTests {
  @Suite("loop.sleep") struct LoopSleep {
    @Test("94. An actor pinned to a loop sleeps on the loop's timer, never off its thread")
    func test_94_pinnedActorSleepsOnTheLoopsTimer() async throws {
      let thread = try ResidentThread(name: "loop-sleep")
      defer { stopAndJoin(thread) }
      let loopThread = thread.threadID
      let sleeper = LoopSleeper(thread: thread)
      let timersBefore = thread.loop.metrics.timersFired
      #expect(GlobalJobCounter.watch(threadID: loopThread))
      let (threads, globalJobs) = try await sleeper.sleep(times: 20)
      _ = GlobalJobCounter.stop()
      #expect(threads == Array(repeating: loopThread, count: 21))
      #expect(thread.loop.metrics.timersFired - timersBefore == 20, "one loop timer per sleep")
      #expect(globalJobs == 0, "no job on Swift's global executor from the loop's thread")
    }

    @Test(
      "94. A task preferring a loop's executor sleeps on the loop's timer, never off its thread")
    func test_94_taskPreferringTheLoopSleepsOnItsTimer() async throws {
      let thread = try ResidentThread(name: "sleep-pref")
      defer { stopAndJoin(thread) }
      let loopThread = thread.threadID
      #expect(GlobalJobCounter.watch(threadID: loopThread))
      let (threads, slept, globalJobs) = try await withTaskExecutorPreference(thread.executor) {
        () async throws -> ([pid_t], Duration, Int) in
        var threads = [crl_gettid()]
        let start = LoopClock.Instant.now
        let before = GlobalJobCounter.count
        for _ in 0..<10 {
          try await thread.loop.sleep(for: .milliseconds(3))
          threads.append(crl_gettid())
        }
        return (threads, start.duration(to: .now), GlobalJobCounter.count - before)
      }
      _ = GlobalJobCounter.stop()
      #expect(threads == Array(repeating: loopThread, count: 11))
      #expect(slept >= .milliseconds(30), "never resumed before its deadline")
      #expect(globalJobs == 0)
    }

    @Test("94. The article's Poller sleeps three times on its thread's timers")
    func test_94_articlePoller() async throws {
      let thread = try ResidentThread(name: "poller")
      defer { stopAndJoin(thread) }
      let fired = thread.loop.metrics.timersFired
      let start = LoopClock.Instant.now
      #expect(try await Poller(thread: thread).pollThreeTimes() == 3)
      #expect(start.duration(to: .now) >= .milliseconds(15))
      #expect(thread.loop.metrics.timersFired - fired == 3)
    }

    @Test("94. sleep(until:) resumes no earlier than its deadline")
    func test_94_sleepUntilADeadline() async throws {
      let thread = try ResidentThread(name: "sleep-until")
      defer { stopAndJoin(thread) }
      let deadline = LoopClock.Instant.now.advanced(by: .milliseconds(30))
      try await thread.sleep(until: deadline, tolerance: .milliseconds(5))
      #expect(LoopClock.Instant.now >= deadline)
      // A deadline already past resumes on the next pass.
      try await thread.loop.sleep(until: deadline)
    }

    @Test("94. Cancelling a loop.sleep removes its timer at once and throws CancellationError")
    func test_94_cancellingRemovesTheTimerAndThrows() async throws {
      let thread = try ResidentThread(name: "sleep-cancel")
      defer { stopAndJoin(thread) }
      let loop = thread.loop
      #expect(timerCount(of: loop) == 0)
      let start = LoopClock.Instant.now
      let task = Task { try await loop.sleep(for: .seconds(600)) }
      // The sleep's timer joins the loop's common modes (a condition, not a sleep, orders this).
      #expect(waitUntil(seconds: 10) { timerCount(of: loop) == 1 })
      task.cancel()
      // `cancel()` ran the cancellation handler before returning: the timer is gone already.
      #expect(timerCount(of: loop) == 0)
      await #expect(throws: CancellationError.self) { try await task.value }
      #expect(start.duration(to: .now) < .seconds(300), "resumed by the cancel, not the timer")
      #expect(loop.metrics.timersFired == 0)
    }

    @Test(
      "94. A task cancelled before it sleeps throws at once and adds no timer",
      .timeLimit(.minutes(1)))
    func test_94_alreadyCancelledThrowsWithoutATimer() async throws {
      let thread = try ResidentThread(name: "sleep-early")
      defer { stopAndJoin(thread) }
      let loop = thread.loop
      let task = Task {
        withUnsafeCurrentTask { $0?.cancel() }
        try await loop.sleep(for: .seconds(600))
      }
      await #expect(throws: CancellationError.self) { try await task.value }
      #expect(timerCount(of: loop) == 0)
    }

    @Test("94. A bad tolerance or a stopped thread throws; a thread that ends mid-sleep resumes it")
    func test_94_errors() async throws {
      let thread = try ResidentThread(name: "sleep-errors")
      await #expect(throws: LoopError.self) {
        try await thread.sleep(for: .milliseconds(1), tolerance: .milliseconds(-1))
      }
      // A sleep in progress when the thread stops: the loop's teardown ends it with an error.
      let sleeping = Task { try await thread.loop.sleep(for: .seconds(600)) }
      #expect(waitUntil(seconds: 10) { timerCount(of: thread.loop) == 1 })
      stopAndJoin(thread)
      await #expect(throws: LoopError.loopTornDown(thread: thread.loop.threadDescription)) {
        try await sleeping.value
      }
      await #expect(throws: LoopError.stopped(thread: "sleep-errors")) {
        try await thread.sleep(for: .milliseconds(1))
      }
    }

    @Test("94. An actor pinned to a resident thread asleep when the thread stops resumes, throwing")
    func test_94_pinnedSleeperAtStop() async throws {
      let thread = try ResidentThread(name: "sleep-stop")
      let sleeper = LoopSleeper(thread: thread)
      let ended = Task { await sleeper.sleepUntilEnded() }
      #expect(waitUntil(seconds: 10) { timerCount(of: thread.loop) == 1 })
      // Before its final drain the loop ends the sleep, so the actor's code runs on the
      // thread, once more, and sees the error (it would trap had it resumed after the drain).
      stopAndJoin(thread)
      let error = await ended.value
      #expect(error as? LoopError == .loopTornDown(thread: thread.loop.threadDescription))
    }

    @Test("94. On a VirtualLoop, loop.sleep counts in virtual time and resumes within advance")
    func test_94_sleepsInVirtualTime() throws {
      let virtual = VirtualLoop()
      let (start, woke, task) = startHourLongVirtualSleep(on: virtual) { loop in
        try await loop.sleep(for: .seconds(3600))
      }
      virtual.advance(by: .seconds(1))
      // No hop through the global executor: the timer's callout resumed the task on the loop,
      // inside the advance (Task.sleep needs a runUntil here; see VirtualTaskSleepTests).
      #expect(woke.value == start.advanced(by: .seconds(3600)))
      withExtendedLifetime(task) {}
    }

    @Test("93. Sleeps whose tolerance windows overlap resume in one pass")
    func test_93_overlappingSleepsShareAPass() throws {
      let virtual = VirtualLoop()
      let loop = virtual.loop
      let start = virtual.now
      let woke = Recorder()
      let tasks = (0..<3).map { index in
        Task(executorPreference: loop.executor) {
          let delay = Duration.milliseconds(100 + 20 * index)
          try await loop.sleep(for: delay, tolerance: .milliseconds(50))
          woke.log("\(index) at \(start.duration(to: loop.now))")
        }
      }
      #expect(virtual.runUntil { timerCount(of: loop) == 3 })
      let firedBefore = loop.metrics.timersFired
      virtual.advance(by: .milliseconds(149))
      #expect(woke.all.isEmpty, "the first window closes at 150 ms")
      virtual.advance(by: .milliseconds(1))
      // All three due at 150 ms (100+50 is the earliest window end; 120 and 140 are inside).
      #expect(Set(woke.all) == ["0 at 0.15 seconds", "1 at 0.15 seconds", "2 at 0.15 seconds"])
      #expect(loop.metrics.timersFired - firedBefore == 3)
      withExtendedLifetime(tasks) {}
    }
  }
}
