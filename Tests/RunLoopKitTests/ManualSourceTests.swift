import Foundation
import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Manual sources (source0)") struct ManualSources {
    @Test(
      "17. A signalled source is not performed until the loop is woken; with wakeUp() it runs promptly"
    )
    func test_17_signalDoesNotWake() throws {
      let performed = Box(0)
      let thread = LoopThread { loop in loop.run(for: .seconds(20)) }
      let source = ManualSource { performed.value += 1 }
      try thread.loop.add(source, to: .default)
      thread.start()
      #expect(waitUntil { thread.loop.isWaiting })
      source.signal()
      usleep(300_000)
      #expect(performed.value == 0)
      #expect(thread.loop.isWaiting)
      thread.loop.wakeUp()
      #expect(waitUntil { performed.value == 1 })
      try thread.loop.perform { thread.loop.stop() }
      thread.join()
      #expect(performed.value == 1)
    }

    @Test(
      "17. A mode whose last look found no manual source signalled looks again only once one is signalled or joins it signalled (the mode counts the looks)"
    )
    func test_17_looksAgainOnlyAfterASignal() throws {
      let performed = Box(0)
      try onLoopThread { loop in
        let source = ManualSource { performed.value += 1 }
        try loop.add(source, to: .default)
        let mode = try #require(loop.lock.withLock { loop.modeStates[.default] })
        let looks = { loop.lock.withLock { mode.manualLooks } }
        _ = loop.run(for: .zero)
        let quiet = looks()
        for _ in 0..<100 { _ = loop.run(for: .zero) }
        #expect(looks() == quiet, "100 passes with nothing signalled looked again")
        source.signal()
        _ = loop.run(for: .zero)
        #expect(performed.value == 1)
        #expect(looks() > quiet)
        // Signalled before it was added, so no loop was told of the signal: joining the mode
        // is what makes the next pass look.
        let late = ManualSource { performed.value += 10 }
        late.signal()
        _ = loop.run(for: .zero)
        try loop.add(late, to: .default)
        _ = loop.run(for: .zero)
        #expect(performed.value == 11)
      }
    }

    @Test("18. Signalled sources run by order, then by signal time")
    func test_18_orderThenSignalTime() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        let two = ManualSource(order: 2) { recorder.log("order 2") }
        let one = ManualSource(order: 1) { recorder.log("order 1") }
        let firstSignalled = ManualSource(order: 5) { recorder.log("5 first") }
        let secondSignalled = ManualSource(order: 5) { recorder.log("5 second") }
        for source in [secondSignalled, two, firstSignalled, one] {
          try loop.add(source, to: .default)
        }
        two.signal()
        one.signal()
        firstSignalled.signal()
        secondSignalled.signal()
        loop.run(for: .zero)
      }
      #expect(recorder.all == ["order 1", "order 2", "5 first", "5 second"])
    }

    @Test(
      "19. With returnAfterSourceHandled exactly one signalled source runs; the other stays signalled"
    )
    func test_19_returnAfterSourceHandled() throws {
      let recorder = Recorder()
      let (first, stillSignalled, second) = try onLoopThread { loop in
        let a = ManualSource(order: 1) { recorder.log("a") }
        let b = ManualSource(order: 2) { recorder.log("b") }
        try loop.add(a, to: .default)
        try loop.add(b, to: .default)
        a.signal()
        b.signal()
        let first = loop.run(for: .seconds(5), returnAfterSourceHandled: true)
        let stillSignalled = b.isSignalled
        let second = loop.run(for: .seconds(5), returnAfterSourceHandled: true)
        return (first, stillSignalled, second)
      }
      #expect(first == .handledSource)
      #expect(stillSignalled)
      #expect(second == .handledSource)
      #expect(recorder.all == ["a", "b"])
    }

    @Test(
      "20. A source signalled inside its own perform runs again on a later pass, not recursively")
    func test_20_resignalRunsLater() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        let depth = Box(0)
        let count = Box(0)
        let source = Box<ManualSource?>(nil)
        source.value = ManualSource {
          depth.value += 1
          count.value += 1
          recorder.log("perform \(count.value) depth \(depth.value)")
          if count.value < 2 { source.value?.signal() }
          depth.value -= 1
        }
        try loop.add(source.value!, to: .default)
        try loop.add(
          LoopObserver(activities: .beforeSources) { _, _ in recorder.log("pass") }, to: .default)
        source.value!.signal()
        loop.run(for: .milliseconds(50))
        source.value!.invalidate()
        source.value = nil  // the source's closure holds the box: break the cycle
      }
      let performs = recorder.all.filter { $0.hasPrefix("perform") }
      #expect(performs == ["perform 1 depth 1", "perform 2 depth 1"])
      let first = recorder.all.firstIndex(of: "perform 1 depth 1")!
      let second = recorder.all.firstIndex(of: "perform 2 depth 1")!
      #expect(recorder.all[first..<second].contains("pass"))
    }

    @Test("21. Adding schedules once per mode, adding again does nothing, removing cancels")
    func test_21_scheduleAndCancel() throws {
      let recorder = Recorder()
      let loopID = try onLoopThread { loop in
        let source = ManualSource(
          schedule: { scheduledOn, mode in
            recorder.log("schedule \(mode) same loop \(scheduledOn === loop)")
          },
          cancel: { _, mode in recorder.log("cancel \(mode)") }
        ) {}
        try loop.add(source, to: .default)
        try loop.add(source, to: .default)
        #expect(loop.contains(source, in: .default))
        loop.remove(source, from: .default)
        #expect(!loop.contains(source, in: .default))
        loop.remove(source, from: .default)
        return ObjectIdentifier(loop)
      }
      _ = loopID
      #expect(recorder.all == ["schedule default same loop true", "cancel default"])
    }

    @Test("22. A source added to .common while the set is {default, X} is scheduled in both")
    func test_22_commonSchedulesEveryCommonMode() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        try loop.addCommonMode("X")
        let source = ManualSource(schedule: { _, mode in recorder.log("schedule \(mode)") }) {}
        try loop.add(source, to: .common)
        #expect(loop.contains(source, in: .default))
        #expect(loop.contains(source, in: "X"))
        #expect(loop.contains(source, in: .common))
      }
      #expect(Set(recorder.all) == ["schedule default", "schedule X"])
      #expect(recorder.all.count == 2)
    }

    @Test(
      "23. Invalidating cancels in every mode, isValid becomes false, later signals are ignored")
    func test_23_invalidate() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        let source = ManualSource(cancel: { _, mode in recorder.log("cancel \(mode)") }) {
          recorder.log("performed")
        }
        try loop.add(source, to: .default)
        try loop.add(source, to: "X")
        source.invalidate()
        #expect(!source.isValid)
        source.signal()
        #expect(!source.isSignalled)
        #expect(!loop.contains(source, in: .default))
        #expect(throws: LoopError.invalidated(item: "ManualSource")) {
          try loop.add(source, to: .default)
        }
        try loop.add(ManualSource {}, to: .default)
        loop.run(for: .milliseconds(20))
      }
      #expect(Set(recorder.all) == ["cancel default", "cancel X"])
      #expect(recorder.all.count == 2)
    }

    @Test("24. A signalled source removed before it runs does not run in that mode")
    func test_24_removeSignalledSource() throws {
      let performed = Box(0)
      try onLoopThread { loop in
        let source = ManualSource { performed.value += 1 }
        try loop.add(source, to: .default)
        try loop.add(ManualSource {}, to: .default)
        source.signal()
        loop.remove(source, from: .default)
        loop.run(for: .milliseconds(20))
      }
      #expect(performed.value == 0)
    }
  }
}
