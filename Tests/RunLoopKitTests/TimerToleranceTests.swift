import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// How a loop sleeps while its mode waits for timers: on its futex (no descriptor in the
/// mode) or in `epoll_wait` (a descriptor to watch, here a pipe nobody writes).
enum WaitModeUnderTest: String, CaseIterable, Sendable {
  case futex
  case epoll

  /// Runs `body` with the default mode of `loop` (the calling thread's) set up to sleep this
  /// way: for `.epoll`, a pipe nobody writes is watched there until `body` returns.
  func arrange<T>(_ loop: Loop, _ body: () throws -> T) throws -> T {
    let pipe = makePipe()
    defer {
      close(pipe.read)
      close(pipe.write)
    }
    let reader = DescriptorSource(fileDescriptor: pipe.read) { _, _ in }
    defer { reader.invalidate() }
    if self == .epoll { try loop.add(reader, to: .default) }
    return try body()
  }
}

extension RunLoopKitTests {
  @Suite("Timer tolerance in real time") struct TimerTolerance {
    /// Adds timers at `offsets` from now with `tolerance` to a fresh thread's loop sleeping
    /// as `waitMode` says, runs until all fired; returns, per timer, the pass it fired in and
    /// how late it was, plus the number of wakes that ended a sleep on a timer.
    private func fire(
      offsets: [Duration], tolerance: Duration, waitMode: WaitModeUnderTest
    ) throws -> (passes: [UInt64], lateness: [Duration], timerWakes: UInt64) {
      try onLoopThread { loop in
        try waitMode.arrange(loop) {
          let passes = Box<[UInt64]>([])
          let lateness = Box<[Duration]>([])
          let start = LoopClock.Instant.now
          for offset in offsets {
            let date = start.advanced(by: offset)
            try loop.add(
              LoopTimer(fireAt: date, tolerance: tolerance) { _ in
                passes.value.append(loop.metrics.passes)
                lateness.value.append(date.duration(to: .now))
                if passes.value.count == offsets.count { loop.stop() }
              }, to: .default)
          }
          loop.run(for: .seconds(30))
          return (passes.value, lateness.value, loop.metrics.wakes.timer)
        }
      }
    }

    @Test(
      "93. Timers whose tolerance windows overlap fire in one pass, none early, in both wait modes",
      arguments: WaitModeUnderTest.allCases)
    func test_93_overlappingWindowsFireInOnePass(waitMode: WaitModeUnderTest) throws {
      // Windows [300, 600], [330, 630], [360, 660] ms: the first closes at 600 ms, after
      // the other two opened, so one wake at 600 ms serves all three. (A loop thread held up
      // past 600 ms before its first wait finds all three due and fires them in one pass
      // too, without sleeping: hence at most one wake.)
      let offsets: [Duration] = [.milliseconds(300), .milliseconds(330), .milliseconds(360)]
      let result = try fire(offsets: offsets, tolerance: .milliseconds(300), waitMode: waitMode)
      #expect(result.passes.count == 3)
      #expect(Set(result.passes).count == 1, "one pass: \(result.passes)")
      #expect(result.timerWakes <= 1)
      for late in result.lateness {
        #expect(late >= .zero, "no timer fires before its fire date")
        #expect(late < .seconds(2), "generous bound: the window plus the kernel's latency")
      }
    }

    @Test(
      "93. Without tolerance the same timers fire on separate wakes, none early, in both modes",
      arguments: WaitModeUnderTest.allCases)
    func test_93_zeroToleranceDoesNotCoalesce(waitMode: WaitModeUnderTest) throws {
      // 250 ms apart: the control for the test above, so that one can fail.
      let offsets: [Duration] = [.milliseconds(50), .milliseconds(300), .milliseconds(550)]
      let result = try fire(offsets: offsets, tolerance: .zero, waitMode: waitMode)
      #expect(result.passes.count == 3)
      #expect(Set(result.passes).count >= 2, "fired in passes \(result.passes)")
      #expect(result.timerWakes >= 2)
      for late in result.lateness { #expect(late >= .zero && late < .seconds(2)) }
    }

    @Test(
      "93. A loop that sleeps with a deadline (a timer's on the futex, the run's in epoll) sets its thread's timer slack to the least",
      arguments: WaitModeUnderTest.allCases)
    func test_93_loopLowersItsThreadsTimerSlack(waitMode: WaitModeUnderTest) throws {
      let (before, after) = try onLoopThread { loop in
        // The thread starts with its creator's slack; 50 µs, or whatever the runner set.
        try TimerSlack.setCurrentThread(nanoseconds: 50_000)
        let before = TimerSlack.currentThread
        try waitMode.arrange(loop) {
          try loop.add(LoopTimer(after: .milliseconds(5)) { _ in loop.stop() }, to: .default)
          loop.run(for: .seconds(30))
        }
        return (before, TimerSlack.currentThread)
      }
      #expect(before == 50_000)
      #expect(after == TimerSlack.least)
    }

    @Test("93. A busy-waiting loop whose mode holds only timers fires them")
    func test_93_busyWaitFiresTimers() throws {
      let (fired, elapsed) = try onLoopThread { loop in
        loop.waitPolicy = .busyWait
        let fired = Box(false)
        let start = LoopClock.Instant.now
        try loop.add(
          LoopTimer(after: .milliseconds(20)) { _ in
            fired.value = true
            loop.stop()
          }, to: .default)
        loop.run(for: .seconds(10))
        return (fired.value, start.duration(to: .now))
      }
      #expect(fired)
      #expect(elapsed < .seconds(5))
    }

    @Test(
      "93. A loop asleep in epoll whose last descriptor left still wakes for a timer added from another thread"
    )
    func test_93_timerAfterLastDescriptorLeftWakesEpollSleep() throws {
      try withEpollSleeper("epoll-timer") { thread, reader in
        let loop = thread.loop
        #expect(waitUntil(seconds: 10) { loop.isWaiting && loop.contains(reader, in: .default) })
        #expect(asleepInEpoll(loop))
        // Removing the descriptor does not wake it; a timer added next must.
        reader.invalidate()
        let fired = Box(false)
        try loop.add(LoopTimer(after: .milliseconds(20)) { _ in fired.value = true }, to: .default)
        #expect(waitUntil(seconds: 10) { fired.value }, "the timer fired")
      }
    }

    @Test(
      "93. A loop asleep in epoll carries a timer date less than 10 ms away in the wait's timeout: the timerfd stays disarmed, and the wake counts as a timer's"
    )
    func test_93_epollSleepCarriesDeadlineInTimeout() throws {
      let (fired, late, armedWhileWaiting, timerWakes) = try onLoopThread {
        loop -> (Int, Duration, Bool, UInt64) in
        try WaitModeUnderTest.epoll.arrange(loop) {
          let fired = Box(0)
          let late = Box(Duration.zero)
          let armed = Box(false)
          let observer = LoopObserver(activities: .afterWaiting) { _, _ in
            // Whatever the loop slept for, the timerfd never held it.
            armed.value =
              armed.value
              || loop.lock.withLock { loop.modeStates[.default]?.timerFD.armedDeadline != nil }
          }
          try loop.add(observer, to: .default)
          defer { observer.invalidate() }
          let date = Box(LoopClock.Instant.now.advanced(by: .milliseconds(5)))
          let timer = try LoopTimer(fireAt: date.value, interval: .seconds(3600)) { timer in
            fired.value += 1
            late.value = max(late.value, date.value.duration(to: .now))
            // Moved on the loop's thread, as a C library's timer callback does.
            date.value = LoopClock.now.advanced(by: .milliseconds(5))
            timer.fireDate = fired.value < 5 ? date.value : .distantFuture
            if fired.value == 5 { loop.stop() }
          }
          try loop.add(timer, to: .default)
          defer { timer.invalidate() }
          let wakes = loop.metrics.wakes.timer
          loop.run(for: .seconds(30))
          return (fired.value, late.value, armed.value, loop.metrics.wakes.timer - wakes)
        }
      }
      #expect(fired == 5)
      #expect(late >= .zero && late < .seconds(2))
      #expect(!armedWhileWaiting, "no timerfd_settime: the wait's timeout carried the deadline")
      #expect(timerWakes >= 1 && timerWakes <= 5, "counted as timer wakes: \(timerWakes)")
    }

    @Test(
      "93. A loop asleep in epoll until a distant timer wakes on time for a timer another thread adds or moves earlier"
    )
    func test_93_otherThreadShortensEpollSleep() throws {
      try withEpollSleeper("epoll-timeout") { thread, _ in
        let loop = thread.loop
        let moved = Box(false)
        let distant = try LoopTimer(after: .seconds(3600), repeating: .seconds(3600)) { _ in
          moved.value = true
        }
        try loop.add(distant, to: .default)
        defer { distant.invalidate() }
        // Asleep in epoll with a one-hour timeout.
        #expect(waitUntil(seconds: 10) { loop.contains(distant, in: .default) && loop.isWaiting })
        #expect(asleepInEpoll(loop))
        let added = Box(false)
        try loop.add(LoopTimer(after: .milliseconds(20)) { _ in added.value = true }, to: .default)
        #expect(waitUntil(seconds: 10) { added.value }, "a timer added from another thread fired")
        #expect(asleepInEpoll(loop))
        distant.fireDate = LoopClock.now.advanced(by: .milliseconds(20))
        #expect(waitUntil(seconds: 10) { moved.value }, "a timer moved from another thread fired")
      }
    }

    @Test(
      "93. A loop asleep in epoll until a date more than 10 ms away has its timerfd hold it (a timeout that long may run 0.1 % late)"
    )
    func test_93_distantDateGoesInTheTimerFD() throws {
      try withEpollSleeper("epoll-distant") { thread, _ in
        let loop = thread.loop
        let fired = Box(false)
        let timer = try LoopTimer(after: .milliseconds(300)) { _ in fired.value = true }
        try loop.add(timer, to: .default)
        #expect(waitUntil(seconds: 10) { loop.contains(timer, in: .default) && loop.isWaiting })
        #expect(asleepInEpoll(loop))
        let held = loop.lock.withLock { loop.modeStates[.default]?.timerFD.armedDeadline }
        #expect(fired.value || held == timer.fireDate, "the timerfd holds the date")
        #expect(waitUntil(seconds: 10) { fired.value })
      }
    }

    /// Runs `body` with a resident thread whose loop watches, in its default mode, a pipe
    /// nobody writes: so it sleeps in the mode's epoll set. `body` gets the pipe's source.
    private func withEpollSleeper(
      _ name: String, _ body: (ResidentThread, DescriptorSource) throws -> Void
    ) throws {
      let thread = try ResidentThread(name: name)
      defer { stopAndJoin(thread) }
      let pipe = makePipe()
      defer {
        close(pipe.read)
        close(pipe.write)
      }
      let reader = DescriptorSource(fileDescriptor: pipe.read) { _, _ in }
      try thread.loop.add(reader, to: .default)
      defer { reader.invalidate() }
      try body(thread, reader)
    }

    /// Waits until the loop is asleep in an epoll set (a condition, not a sleep).
    private func asleepInEpoll(_ loop: Loop) -> Bool {
      waitUntil(seconds: 10) { loop.lock.withLock { loop.sleeping && !loop.sleepingOnFutex } }
    }
  }
}
