import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// The lock-free post queue (`Loop.PostQueue`): a poster claims a slot, then writes it, and
/// the loop takes written slots in order. These tests hold a poster between the two steps
/// (`TestPausePoint.postClaimed`) to reach the interleavings timing alone rarely does.
extension RunLoopKitTests {
  @Suite("Posting without the lock") struct PostQueueTests {
    @Test(
      "48. A poster held between claiming and writing its slot wakes the sleeping loop once it writes"
    )
    func test_48_heldPosterWakesTheSleep() throws {
      let ran = Counter()
      let thread = LoopThread { loop in
        loop.run(for: .seconds(30))
      }
      let loop = thread.loop
      try loop.add(ManualSource {}, to: .default)
      thread.start()
      #expect(waitUntil { loop.isWaiting })
      let held = holdAt(.postClaimed, for: loop.posted)
      defer { TestPausePoint.disarm(.postClaimed, for: loop.posted) }
      let poster = TestThread {
        try? loop.perform { _ = ran.increment() }
      }
      #expect(held.arrived.wait())
      // The claim alone wakes nothing: there is no block to run yet.
      #expect(loop.isWaiting)
      held.release.open()
      poster.join()
      #expect(waitUntil { ran.value == 1 })
      try loop.perform { loop.stop() }
      thread.join()
    }

    @Test(
      "51. A drain waits for a block claimed before it began, so a block posted after it is not left behind"
    )
    func test_51_drainWaitsForEarlierClaims() throws {
      let order = Recorder()
      let thread = LoopThread { loop in
        loop.run(for: .zero)  // one pass
      }
      let loop = thread.loop
      try loop.add(ManualSource {}, to: .default)
      let held = holdAt(.postClaimed, for: loop.posted)
      defer {
        TestPausePoint.disarm(.postClaimed, for: loop.posted)
        TestPausePoint.disarm(.drainWaitsForClaim, for: loop.posted)
      }
      let poster = TestThread {
        try? loop.perform { order.log("held") }
      }
      #expect(held.arrived.wait())
      // Accepted: `perform` returned. The pass must run it, after the held one.
      try loop.perform { order.log("behind") }
      TestPausePoint.arm(.drainWaitsForClaim, for: loop.posted) { held.release.open() }
      thread.start()
      thread.join()
      poster.join()
      #expect(order.all == ["held", "behind"])
    }

    @Test(
      "89. A thread's exit waits for a post that claimed its slot before the close, and runs it")
    func test_89_exitWaitsForAClaimedPost() throws {
      let ran = Recorder()
      let leave = Gate()
      let thread = LoopThread { _ in
        leave.wait()  // then the thread exits: its loop runs what it accepted, then closes
      }
      let loop = thread.loop
      thread.start()
      let held = holdAt(.postClaimed, for: loop.posted)
      defer {
        TestPausePoint.disarm(.postClaimed, for: loop.posted)
        TestPausePoint.disarm(.drainWaitsForClaim, for: loop.posted)
      }
      let accepted = Box<Bool?>(nil)
      let poster = TestThread {
        do {
          try loop.perform { ran.log("ran") }
          accepted.value = true
        } catch {
          accepted.value = false
        }
      }
      #expect(held.arrived.wait())
      // The exiting thread finds the claim unwritten: it may neither close nor drop it.
      TestPausePoint.arm(.drainWaitsForClaim, for: loop.posted) { held.release.open() }
      leave.open()
      poster.join()
      thread.join()
      #expect(accepted.value == true)
      #expect(ran.all == ["ran"])
      #expect(throws: LoopError.self) { try loop.perform {} }
    }

    @Test("89. Every post racing with its loop's thread exit either runs or is refused")
    func test_89_postsRacingTheExit() throws {
      for _ in 0..<200 {
        let accepted = Counter()
        let ran = Counter()
        let thread = LoopThread { _ in }  // exits as soon as it starts
        let loop = thread.loop
        let poster = TestThread {
          for _ in 0..<50 {
            do {
              try loop.perform { _ = ran.increment() }
              _ = accepted.increment()
            } catch {}
          }
        }
        thread.start()
        poster.join()
        thread.join()
        #expect(ran.value == accepted.value)
      }
    }

    @Test(
      "51. 1 000 blocks posted while the loop was away fill 16 of the queue's blocks and run in order in one drain"
    )
    func test_51_manyBlocksOneDrain() throws {
      let seen = Box<[Int]>([])
      let drains = Box(0)
      let thread = LoopThread { loop in
        loop.run(for: .zero)
      }
      let loop = thread.loop
      try loop.add(ManualSource {}, to: .default)
      try loop.add(
        LoopObserver(activities: .beforeSources) { _, _ in drains.value += 1 }, to: .default)
      let poster = TestThread {
        for index in 0..<1_000 { try? loop.perform { seen.value.append(index) } }
      }
      poster.join()
      thread.start()
      thread.join()
      #expect(seen.value == Array(0..<1_000))
      #expect(drains.value == 1)
      #expect(loop.metrics.blocksRun == 1_000)
    }

    @Test("47. A nested run inside a block does not run the blocks its outer drain took")
    func test_47_nestedRunLeavesTheOuterBatch() throws {
      let order = try onLoopThread { loop -> [String] in
        let order = Recorder()
        try loop.add(ManualSource {}, to: .default)
        try loop.perform {
          order.log("A")
          loop.run(for: .zero)  // a nested pass: B and C belong to the outer drain
          order.log("A returns")
        }
        try loop.perform { order.log("B") }
        try loop.perform { order.log("C") }
        loop.run(for: .zero)
        return order.all
      }
      #expect(order == ["A", "A returns", "B", "C"])
    }
  }
}
