import Foundation
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Observers") struct Observers {
    @Test("41. Observers with order 5, 1, 1 are told 1, 1 (in the order added), 5")
    func test_41_observerOrder() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        try loop.add(ManualSource {}, to: .default)
        for (name, order) in [("five", 5), ("one-first", 1), ("one-second", 1)] {
          try loop.add(
            LoopObserver(activities: .entry, order: order) { _, _ in recorder.log(name) },
            to: .default)
        }
        loop.run(for: .zero)
      }
      #expect(recorder.all == ["one-first", "one-second", "five"])
    }

    @Test("42. A non-repeating observer is told once, then is invalid and removed")
    func test_42_nonRepeatingObserver() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        try loop.add(ManualSource {}, to: .default)
        let once = LoopObserver(activities: .beforeTimers, repeats: false) { _, activity in
          recorder.log("\(activity)")
        }
        try loop.add(once, to: .default)
        loop.run(for: .zero)
        loop.run(for: .zero)
        #expect(!once.isValid)
        #expect(!loop.contains(once, in: .default))
      }
      #expect(recorder.all == ["beforeTimers"])
    }

    @Test(
      "43. An observer for .all sees every activity of a timed-out run with a wake-up, in order")
    func test_43_allActivities() throws {
      let (_, trace) = try runWithOneWakeUp()
      #expect(trace == wokenOnceTrace)
      #expect(
        Set(trace) == [
          "entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "exit",
        ])
    }

    @Test("44. Activity raw values equal CF's")
    func test_44_activityRawValues() {
      #expect(Loop.Activity.entry.rawValue == 1)
      #expect(Loop.Activity.beforeTimers.rawValue == 2)
      #expect(Loop.Activity.beforeSources.rawValue == 4)
      #expect(Loop.Activity.beforeWaiting.rawValue == 32)
      #expect(Loop.Activity.afterWaiting.rawValue == 64)
      #expect(Loop.Activity.exit.rawValue == 128)
      #expect(Loop.Activity.all.rawValue == 1 | 2 | 4 | 32 | 64 | 128)
      #expect(Loop.RunResult.finished.rawValue == 1)
      #expect(Loop.RunResult.handledSource.rawValue == 4)
    }

    @Test("An observer that invalidates itself or runs the loop again is not told recursively")
    func test_observerReentrancy() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        try loop.add(ManualSource {}, to: .default)
        try loop.add(ManualSource {}, to: "nested")
        let reentrant = LoopObserver(activities: .entry) { _, _ in
          recorder.log("entry in \(loop.currentMode!)")
          loop.run(in: "nested", for: .zero)
        }
        try loop.add(reentrant, to: .default)
        try loop.add(reentrant, to: "nested")
        loop.run(for: .zero)
      }
      #expect(recorder.all == ["entry in default"])
    }
  }
}
