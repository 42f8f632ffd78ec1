import Dispatch
import Glibc
import Testing

@testable import RunLoopKit

/// Issue 44, defect 2 (checklist line 97): work that becomes runnable in a mode without a wake
/// of its own — blocks a new common mode makes apply, a source signalled before it joined —
/// wakes the loop wherever that mode waits: a run, a nested run, an embedding between its
/// host's passes.
extension RunLoopKitTests {
  @Suite("Work made runnable in a waiting mode wakes it, however it waits")
  struct WaitingModeWake {
    @Test(
      "97. An embedded mode between passes: addCommonMode making set-aside blocks apply makes the descriptor readable"
    )
    func test_97_embeddedModeWokenByAddCommonMode() throws {
      let (readable, ran) = try onLoopThread { loop -> (Bool, [String]) in
        let log = Recorder()
        try loop.add(ManualSource {}, to: "tracking")
        let embedding = try loop.makeEmbedding(in: "tracking")
        defer { embedding.invalidate() }
        try loop.perform(in: .common) { log.log("common block") }
        // The pass sets the block aside: "tracking" is not common yet.
        embedding.runPass()
        #expect(!isReadable(embedding.descriptor, within: 0), "nothing to do in tracking")
        #expect(log.all.isEmpty)
        try loop.addCommonMode("tracking")
        let readable = isReadable(embedding.descriptor, within: 5_000)
        embedding.runPass()
        return (readable, log.all)
      }
      #expect(readable)
      #expect(ran == ["common block"])
    }

    @Test(
      "97. An embedded mode between passes: a source signalled before it joins the mode makes the descriptor readable"
    )
    func test_97_embeddedModeWokenBySignalledSourceJoining() throws {
      let (readable, performed) = try onLoopThread { loop -> (Bool, Int) in
        let count = Counter()
        try loop.add(ManualSource {}, to: .default)
        let embedding = try loop.makeEmbedding()
        defer { embedding.invalidate() }
        embedding.runPass()
        let source = ManualSource { _ = count.increment() }
        source.signal()  // bound to no loop yet: nothing could wake anything
        try loop.add(source, to: .default)
        let readable = isReadable(embedding.descriptor, within: 5_000)
        embedding.runPass()
        source.invalidate()
        return (readable, count.value)
      }
      #expect(readable)
      #expect(performed == 1)
    }

    @Test(
      "97. A source signalled before it joins the mode a loop sleeps in, from another thread, ends the sleep"
    )
    func test_97_sleepingRunWokenBySignalledSourceJoining() throws {
      let (result, performed, took) = try onLoopThread { loop -> (Loop.RunResult, Int, Duration) in
        try loop.add(ManualSource {}, to: .default)
        let count = Counter()
        let source = ManualSource { _ = count.increment() }
        source.signal()
        DispatchQueue.global().async {
          _ = waitUntil { loop.isWaiting }
          try? loop.add(source, to: .default)
        }
        let start = LoopClock.Instant.now
        let result = loop.run(for: .seconds(10), returnAfterSourceHandled: true)
        source.invalidate()
        return (result, count.value, elapsed(since: start))
      }
      #expect(result == .handledSource)
      #expect(performed == 1)
      #expect(took < .seconds(5))
    }

    @Test(
      "97. A nested run sleeping in a mode is woken when addCommonMode makes queued blocks apply to it"
    )
    func test_97_nestedRunWokenByAddCommonMode() throws {
      let (ran, took) = try onLoopThread { loop -> ([String], Duration) in
        let log = Recorder()
        let took = Box(Duration.zero)
        try loop.add(ManualSource {}, to: .default)
        try loop.add(ManualSource {}, to: "modal")
        let stopper = LoopObserver(activities: .beforeWaiting) { _, _ in
          if !log.all.isEmpty { loop.stop() }
        }
        try loop.add(stopper, to: "modal")
        try loop.perform(in: .default) {
          try? loop.perform(in: .common) { log.log("common block") }
          DispatchQueue.global().async {
            _ = waitUntil { loop.isWaiting && loop.currentMode == "modal" }
            try? loop.addCommonMode("modal")
          }
          let start = LoopClock.Instant.now
          let result = loop.run(in: "modal", for: .seconds(10))
          log.log("nested \(result)")
          took.value = elapsed(since: start)
          loop.stop()  // the outer run
        }
        loop.run(for: .seconds(10))
        stopper.invalidate()
        return (log.all, took.value)
      }
      #expect(ran.first == "common block")
      #expect(took < .seconds(5))
    }
  }
}

extension RunLoopKitTests.Embedding {
  @Test(
    "95. A pass that performed a signalled source leaves the descriptor quiet: no pass for nothing")
  func test_95_noPassForNothingAfterASource() throws {
    let (afterPass, performed) = try onLoopThread { loop -> (Bool, Int) in
      let count = Counter()
      let source = ManualSource { _ = count.increment() }
      try loop.add(source, to: .default)
      let embedding = try loop.makeEmbedding()
      defer {
        embedding.invalidate()
        source.invalidate()
      }
      embedding.runPass()
      DispatchQueue.global().async { source.signal() }
      #expect(isReadable(embedding.descriptor, within: 10_000))
      embedding.runPass()
      return (isReadable(embedding.descriptor, within: 0), count.value)
    }
    #expect(performed == 1)
    #expect(!afterPass, "the host is not asked for another pass")
  }
}
