import Foundation
import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Wait policies") struct WaitPolicies {
    @Test(
      "Spinning then sleeping: posts during the window cost no eventfd write; after it the loop sleeps"
    )
    func spinThenSleep() throws {
      let thread = try ResidentThread(name: "spinner", waitPolicy: .spinThenSleep(.seconds(30)))
      #expect(thread.loop.waitPolicy == .spinThenSleep(.seconds(30)))
      let ran = Box(0)
      let writesBefore = thread.loop.metrics.wakeUpWrites
      for _ in 0..<200 {
        try thread.perform { ran.value += 1 }
        usleep(200)
      }
      #expect(waitUntil { ran.value == 200 })
      #expect(thread.loop.metrics.wakeUpWrites == writesBefore)
      #expect(!thread.loop.isWaiting)  // still inside its 30 s window, spinning
      thread.loop.waitPolicy = .spinThenSleep(.milliseconds(1))
      try thread.perform {}  // the next wait uses the short window, then sleeps
      #expect(waitUntil { thread.loop.isWaiting })
      try thread.perform { ran.value += 1 }
      #expect(waitUntil { ran.value == 201 })
      thread.stop()
      try thread.join()
    }

    @Test(
      "Adaptive: a new loop sleeps; it spins for about twice the typical gap once most gaps are short"
    )
    func adaptiveLearnsGaps() {
      var policy = AdaptiveSpin()
      #expect(policy.window() == nil)
      for _ in 0..<5 { policy.record(gap: .microseconds(3)) }
      #expect(policy.window() == nil)  // five short gaps of eight: not "most"
      policy.record(gap: .microseconds(3))
      #expect(policy.window() == .microseconds(6))
      for _ in 0..<8 { policy.record(gap: .microseconds(40)) }
      #expect(policy.window() == nil)  // sparse: sleeping is cheaper
      for _ in 0..<8 { policy.record(gap: .microseconds(20)) }
      #expect(policy.window() == .nanoseconds(AdaptiveSpin.longestWindow))
      for _ in 0..<8 { policy.record(gap: .nanoseconds(100)) }
      #expect(policy.window() == .nanoseconds(AdaptiveSpin.shortestWindow))
    }

    @Test("Adaptive: spins that find nothing back off exponentially; one that finds work resets it")
    func adaptiveBacksOff() {
      var policy = AdaptiveSpin()
      for _ in 0..<8 { policy.record(gap: .microseconds(2)) }
      func spinsIn(_ waits: Int) -> Int {
        var spins = 0
        for _ in 0..<waits where policy.window() != nil {
          spins += 1
          policy.spinEnded(found: false)
        }
        return spins
      }
      // Misses skip 1, 2, 4, 8 … waits: 4 spins in 1 + 1 + 1 + 2 + 1 + 4 + 1 waits = 11.
      #expect(spinsIn(11) == 4)
      #expect(spinsIn(500) <= 500 / AdaptiveSpin.longestBackoff + 2)
      _ = policy.window()
      policy.spinEnded(found: true)
      var next = 0
      while policy.window() == nil { next += 1 }
      policy.spinEnded(found: false)
      #expect(policy.window() == nil)  // after a reset, a miss skips one wait only
      #expect(policy.window() != nil)
    }

    @Test("Adaptive: serves blocks, timers and descriptors, and sleeps when idle")
    func adaptiveServesEverything() throws {
      let thread = try ResidentThread(name: "adaptive", waitPolicy: .adaptive)
      #expect(thread.loop.waitPolicy == .adaptive)
      #expect(Loop.WaitPolicy.adaptive.description == "adaptive")
      let recorder = try servesTimerAndDescriptor(on: thread)
      let ran = Box(0)
      for _ in 0..<1_000 { try thread.perform { ran.value += 1 } }
      #expect(waitUntil { ran.value == 1_000 && recorder.all.contains("timer") })
      #expect(waitUntil { thread.loop.isWaiting })
      thread.stop()
      try thread.join()
    }

    @Test("Busy-waiting never sleeps, yet still serves blocks, timers and descriptors")
    func busyWait() throws {
      let thread = try ResidentThread(name: "busy", waitPolicy: .busyWait)
      let recorder = try servesTimerAndDescriptor(on: thread)
      try thread.perform { recorder.log("block") }
      #expect(waitUntil { recorder.all.contains("timer") && recorder.all.contains("block") })
      #expect(!thread.loop.isWaiting)
      #expect(thread.loop.metrics.wakeUpWrites == 0)
      thread.stop()
      try thread.join()
    }
  }
}

/// Adds a 20 ms timer (logged as "timer") and checks a pipe's source is served (logged "fd");
/// the caller waits for the timer.
private func servesTimerAndDescriptor(on thread: ResidentThread) throws -> Recorder {
  let recorder = Recorder()
  try thread.loop.add(
    LoopTimer(after: .milliseconds(20)) { _ in recorder.log("timer") }, to: .default)
  try servesDescriptor(on: thread, logging: recorder)
  return recorder
}

/// Adds a source on a fresh pipe from the calling thread, writes a byte, and waits until the
/// thread's loop has logged "fd" for it.
private func servesDescriptor(on thread: ResidentThread, logging recorder: Recorder) throws {
  try withPipe { pipe in
    let source = DescriptorSource(fileDescriptor: pipe.read) { _, _ in
      drain(pipe.read)
      recorder.log("fd")
    }
    try thread.loop.add(source, to: .default)
    writeByte(pipe.write)
    #expect(waitUntil { recorder.all.contains("fd") })
    source.invalidate()
  }
}

extension RunLoopKitTests {
  /// A mode with no descriptor to watch sleeps on the loop's futex rather than in epoll_wait;
  /// whatever another thread adds must still reach the sleeping loop at once.
  @Suite("Sleeping without descriptors") struct SleepingWithoutDescriptors {
    @Test("25 on a futex sleeper: a descriptor added from another thread is watched at once")
    func descriptorAddedWhileAsleep() throws {
      let thread = try ResidentThread(name: "futex-fd")
      #expect(waitUntil { thread.loop.isWaiting })
      let recorder = Recorder()
      try servesDescriptor(on: thread, logging: recorder)
      #expect(recorder.all == ["fd"])
      thread.stop()
      try thread.join()
    }

    @Test("A timer added from another thread to a futex sleeper fires on time, earlier ones first")
    func timerAddedWhileAsleep() throws {
      let thread = try ResidentThread(name: "futex-timer")
      let recorder = Recorder()
      // Asleep with no deadline at all, then asleep until a far timer: each new, earlier timer
      // must cut the sleep short.
      #expect(waitUntil { thread.loop.isWaiting })
      let far = try LoopTimer(after: .seconds(60)) { _ in recorder.log("far") }
      try thread.loop.add(far, to: .default)
      let start = LoopClock.Instant.now
      try thread.loop.add(
        LoopTimer(after: .milliseconds(200)) { _ in recorder.log("200 ms") }, to: .default)
      try thread.loop.add(
        LoopTimer(after: .milliseconds(50)) { _ in recorder.log("50 ms") }, to: .default)
      #expect(waitUntil { recorder.all.count == 2 })
      #expect(recorder.all == ["50 ms", "200 ms"])
      #expect(elapsed(since: start) >= .milliseconds(200))
      #expect(elapsed(since: start) < .seconds(5))
      far.invalidate()
      thread.stop()
      try thread.join()
    }

    @Test("A post to a futex sleeper costs one wake-up; posts to a busy loop cost none")
    func oneWakePerSleep() throws {
      let thread = try ResidentThread(name: "futex-count")
      #expect(waitUntil { thread.loop.isWaiting })
      let before = thread.loop.metrics.wakeUpWrites
      let ran = Box(0)
      try thread.perform { usleep(50_000) }  // keeps the loop busy while the rest arrive
      for _ in 0..<100 { try thread.perform { ran.value += 1 } }
      #expect(waitUntil { ran.value == 100 })
      #expect(thread.loop.metrics.wakeUpWrites - before == 1)
      thread.stop()
      try thread.join()
    }
  }
}

extension RunLoopKitTests {
  @Suite("Metrics") struct Metrics {
    @Test("Metrics count passes, wakes by cause, time asleep, blocks, sources and timers")
    func metricsCountWhatHappened() throws {
      // Two runs: the first sees one wake of each kind and is stopped once the last has been
      // seen (no deadline to race); the second, idle, times out.
      let timedRun = Duration.milliseconds(200)
      let runs = Box<[Loop.RunResult]>([])
      let timedLength = Box(Duration.zero)
      let outside = Box(Duration.zero)
      let thread = LoopThread { loop in
        let start = LoopClock.Instant.now
        runs.value.append(loop.run(for: .seconds(60)))
        let timedStart = LoopClock.Instant.now
        runs.value.append(loop.run(for: timedRun))
        timedLength.value = timedStart.duration(to: .now)
        outside.value = start.duration(to: .now)
      }
      let loop = thread.loop
      let port = try LoopPort<Int> { _ in }
      try loop.add(port, to: .default)
      let pipe = makePipe()
      defer {
        close(pipe.read)
        close(pipe.write)
      }
      let descriptor = DescriptorSource(fileDescriptor: pipe.read) { _, _ in drain(pipe.read) }
      try loop.add(descriptor, to: .default)
      let source = ManualSource {}
      try loop.add(source, to: .default)
      let timerFired = Box(false)
      thread.start()
      #expect(waitUntil { loop.isWaiting })
      try port.send(1)  // a port wake
      #expect(waitUntil { loop.metrics.wakes.port == 1 && loop.isWaiting })
      writeByte(pipe.write)  // a descriptor wake
      #expect(waitUntil { loop.metrics.wakes.descriptor == 1 && loop.isWaiting })
      try loop.perform {}  // a wake-up
      #expect(waitUntil { loop.metrics.wakes.wakeUp == 1 && loop.isWaiting })
      source.signalAndWake()
      #expect(waitUntil { loop.metrics.wakes.wakeUp == 2 && loop.isWaiting })
      try loop.add(
        LoopTimer(after: .milliseconds(10)) { _ in timerFired.value = true }, to: .default)
      #expect(waitUntil { loop.metrics.wakes.timer == 1 && timerFired.value && loop.isWaiting })
      #expect(loop.metrics.wakes.timeout == 0)
      loop.stop()  // a third wake-up; then the timed run times out
      thread.join()
      let metrics = loop.metrics
      #expect(runs.value == [.stopped, .timedOut])
      #expect(metrics.wakes.timeout == 1)
      #expect(metrics.wakes.wakeUp == 3)
      #expect(metrics.wakes.port == 1 && metrics.wakes.descriptor == 1)
      #expect(metrics.wakes.timer == 1)
      #expect(metrics.blocksRun == 1)
      #expect(metrics.sourcesHandled == 3)  // the port, the pipe and the manual source
      #expect(metrics.timersFired == 1)
      #expect(metrics.passes >= 7)
      // The idle run alone lasted its full length; time counted inside runs is never more
      // than the time measured around them.
      #expect(timedLength.value >= timedRun)
      #expect(metrics.timeRunning >= timedRun)
      #expect(metrics.timeRunning <= outside.value)
      // The idle run is at least half asleep, as the original 1.5 s run was.
      #expect(metrics.timeAsleep > timedRun / 2 && metrics.timeAsleep <= metrics.timeRunning)
      #expect(metrics.timeBusy >= .zero)
    }
  }
}
