import Foundation
import Testing

@testable import RunLoopKit

/// Checklist line 102: the manual-source phase takes what was signalled from the mode's ready
/// heap and never walks the mode's sources. Counted, not timed: the mode's item set counts
/// every element a walk visits (`ItemSet.steps`), and the ready heap every entry it places or
/// moves (`ReadySources.moves`).
extension RunLoopKitTests {
  @Suite("Ready manual sources are found without looking at idle ones") struct ReadySourcesTests {
    @Test(
      "102. With 50 000 idle sources in the mode, 1 000 passes each performing one source signalled at random walk no source and move at most a few heap entries each"
    )
    func test_102_passCostFollowsReadySources() throws {
      let count = 50_000
      let performed = Box([Int](repeating: 0, count: count))
      try onLoopThread { loop in
        var sources: [ManualSource] = []
        for index in 0..<count {
          let source = ManualSource(order: index % 3) { performed.value[index] += 1 }
          try loop.add(source, to: .default)
          sources.append(source)
        }
        let mode = try #require(loop.lock.withLock { loop.modeStates[.default] })
        let meters = { loop.lock.withLock { (mode.manualSources.steps, mode.ready.moves) } }
        _ = loop.run(for: .zero)
        let before = meters()
        var generator = SplitMixGenerator(seed: 102)
        var expected = [Int](repeating: 0, count: count)
        for _ in 0..<1_000 {
          let index = Int.random(in: 0..<count, using: &generator)
          sources[index].signal()
          expected[index] += 1
          #expect(loop.run(for: .zero) == .timedOut)
        }
        let after = meters()
        #expect(performed.value == expected)
        #expect(after.0 == before.0, "the passes walked \(after.0 - before.0) sources")
        // One insert and one removal per source performed: nothing grows with the mode.
        #expect(after.1 - before.1 >= 2_000, "the heap meter missed moves")
        #expect(after.1 - before.1 <= 4_000, "\(after.1 - before.1) heap moves for 1 000 sources")
      }
    }

    @Test(
      "102. Sources signalled together run by order then signal time, however many idle sources the mode holds, and none twice"
    )
    func test_102_orderAmongManyIdle() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        var idle: [ManualSource] = []
        for _ in 0..<10_000 {
          let source = ManualSource(order: -1) { recorder.log("idle") }
          try loop.add(source, to: .default)
          idle.append(source)
        }
        let late = ManualSource(order: 1) { recorder.log("order 1, signalled first") }
        let early = ManualSource(order: 0) { recorder.log("order 0, signalled second") }
        let tie = ManualSource(order: 1) { recorder.log("order 1, signalled third") }
        for source in [tie, late, early] { try loop.add(source, to: .default) }
        late.signal()
        early.signal()
        tie.signal()
        late.signal()  // already signalled: keeps its place
        _ = loop.run(for: .zero)
        _ = loop.run(for: .zero)
        #expect(
          recorder.all == [
            "order 0, signalled second", "order 1, signalled first", "order 1, signalled third",
          ])
        withExtendedLifetime(idle) {}
      }
    }

    @Test(
      "102. A source in two modes, performed in one, is no longer ready in the other; signalled again, it runs in whichever mode runs next"
    )
    func test_102_performedInOneModeLeavesTheOther() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        let source = ManualSource { recorder.log("performed") }
        try loop.add(source, to: .default)
        try loop.add(source, to: "other")
        let anchor = ManualSource {}
        try loop.add(anchor, to: "other")
        source.signal()
        _ = loop.run(for: .zero)
        _ = loop.run(in: "other", for: .zero)
        #expect(recorder.all == ["performed"])
        source.signal()
        _ = loop.run(in: "other", for: .zero)
        _ = loop.run(for: .zero)
        #expect(recorder.all == ["performed", "performed"])
        let heaps = loop.lock.withLock {
          (loop.modeStates[.default]?.ready.count, loop.modeStates["other"]?.ready.count)
        }
        #expect(heaps.0 == 0 && heaps.1 == 0)
      }
    }

    @Test(
      "102. A signalled source removed from its mode, or invalidated, leaves the mode's ready heap; added back signalled, it runs once"
    )
    func test_102_removedAndReadded() throws {
      let performed = Box(0)
      try onLoopThread { loop in
        let source = ManualSource { performed.value += 1 }
        let gone = ManualSource { performed.value += 100 }
        let first = ManualSource(order: -1) {}
        for item in [first, source, gone] { try loop.add(item, to: .default) }
        let heap = { loop.lock.withLock { loop.modeStates[.default]?.ready.count } }
        // A run that returns after one source leaves the others in the mode's ready heap.
        for item in [first, source, gone] { item.signal() }
        #expect(loop.run(for: .zero, returnAfterSourceHandled: true) == .handledSource)
        #expect(heap() == 2)
        loop.remove(source, from: .default)
        gone.invalidate()
        #expect(heap() == 0)
        _ = loop.run(for: .zero)
        #expect(performed.value == 0)
        // Still signalled, it joins the mode ready.
        try loop.add(source, to: .default)
        #expect(heap() == 1)
        _ = loop.run(for: .zero)
        _ = loop.run(for: .zero)
        #expect(performed.value == 1)
      }
    }

    @Test(
      "102. Two threads signalling 1 000 sources at random with signalAndWake, 100 000 times, while the loop runs: every source signalled is performed and none is left signalled (no wake-up lost to the unlocked check)"
    )
    func test_102_noSignalLostAcrossThreads() throws {
      let count = 1_000
      let performed = Counter()
      let thread = LoopThread { loop in loop.run(for: .seconds(60)) }
      var sources: [ManualSource] = []
      for _ in 0..<count {
        let source = ManualSource { performed.increment() }
        try thread.loop.add(source, to: .default)
        sources.append(source)
      }
      thread.start()
      let all = sources
      let signallers = (0..<2).map { seed in
        TestThread {
          var generator = SplitMixGenerator(seed: UInt64(102 + seed))
          for _ in 0..<50_000 {
            all[Int.random(in: 0..<count, using: &generator)].signalAndWake()
          }
        }
      }
      for signaller in signallers { signaller.join() }
      // A wake-up lost for good leaves a source signalled while the loop sleeps for 60 s.
      #expect(waitUntil(seconds: 10) { all.allSatisfy { !$0.isSignalled } })
      #expect(performed.value > 0)
      try thread.loop.perform { thread.loop.stop() }
      thread.join()
    }

    @Test(
      "102. signalAndWake on a source another thread has just signalled finds it handed to the loop: the pass it wakes performs it"
    )
    func test_102_signalAndWakeAfterAnotherThreadsSignal() throws {
      let performed = Counter()
      let source = ManualSource { performed.increment() }
      let thread = LoopThread { loop in loop.run(for: .seconds(20)) }
      try thread.loop.add(source, to: .default)
      thread.start()
      #expect(waitUntil { thread.loop.isWaiting })
      // Thread A signals and is held right after it let go of the source's lock.
      let hold = holdAt(.signalHandedOver, for: source)
      let signaller = TestThread { source.signal() }
      hold.arrived.wait()
      // Thread B finds the source signalled, so its signalAndWake only wakes the loop.
      #expect(source.isSignalled)
      source.signalAndWake()
      let performedWhileHeld = waitUntil(seconds: 5) { performed.value == 1 }
      hold.release.open()
      signaller.join()
      #expect(performedWhileHeld, "the woken pass found nothing: the signal was not handed over")
      try thread.loop.perform { thread.loop.stop() }
      thread.join()
      #expect(performed.value == 1)
    }
  }
}
