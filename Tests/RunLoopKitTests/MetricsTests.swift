import Foundation
import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Metrics") struct MetricsSuite {
    @Test(
      "71. timeRunning and timeAsleep are true for a loop still inside run (a resident thread): within 5 % of the wall time"
    )
    func test_71_metricsOfARunningLoop() throws {
      let beforeStart = LoopClock.Instant.now
      let thread = try ResidentThread(name: "metered")
      let started = LoopClock.Instant.now
      usleep(400_000)
      try thread.performAndWait {}  // one wake in the middle: a sleep ended and a new one began
      usleep(400_000)
      let metrics = thread.loop.metrics
      let wall = started.duration(to: .now)
      let wallSinceInit = beforeStart.duration(to: .now)
      // The run began between `beforeStart` and `started`, and has not returned.
      #expect(metrics.timeRunning >= wall * 0.95)
      #expect(metrics.timeRunning <= wallSinceInit)
      // busy + asleep is the time running, and an idle thread is nearly all asleep.
      #expect(metrics.timeBusy + metrics.timeAsleep == metrics.timeRunning)
      #expect(metrics.timeBusy >= .zero)
      #expect(metrics.timeAsleep >= wall * 0.95)
      // Later snapshots keep growing while the loop sleeps.
      usleep(50_000)
      #expect(thread.loop.metrics.timeAsleep >= metrics.timeAsleep + .milliseconds(50))
    }

    @Test("timeAsleep and timeRunning never go backwards between snapshots")
    func metricsOnlyGrow() throws {
      let thread = try ResidentThread(name: "metered")
      let stop = Box(false)
      // A poster keeps the loop waking up, so snapshots land on every edge of a sleep.
      let poster = TestThread {
        while !stop.value {
          try? thread.perform {}
          usleep(20)
        }
      }
      var last = thread.loop.metrics
      var backwards = 0
      for _ in 0..<100_000 {
        let next = thread.loop.metrics
        if next.timeAsleep < last.timeAsleep || next.timeRunning < last.timeRunning {
          backwards += 1
        }
        last = next
      }
      stop.value = true
      poster.join()
      #expect(backwards == 0)
      #expect(last.wakes.wakeUp > 0)
    }

    @Test("Metrics print as three readable lines")
    func metricsDescription() throws {
      let text = try onLoopThread { loop -> String in
        try loop.add(ManualSource {}, to: .default)
        try loop.perform {}
        loop.run(for: .milliseconds(20))
        return "\(loop.metrics)"
      }
      let lines = text.split(separator: "\n")
      #expect(lines.count == 3)
      #expect(lines[0].hasPrefix("running 0.0"))
      #expect(lines[0].contains(" s: asleep 0.0"))
      #expect(lines[0].contains("%), busy "))
      #expect(lines[1].hasPrefix("woken 1 times: 0 wake-ups, 0 timers, 0 descriptors"))
      #expect(lines[1].hasSuffix("1 timeouts"))
      #expect(lines[2].hasPrefix("ran 1 blocks, 0 sources, 0 timers;"))
    }
  }
}
