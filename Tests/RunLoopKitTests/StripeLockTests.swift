import Testing

@testable import RunLoopKit

/// Issue 45: a timer's lock is a futex word shared with 1/64 of all timers (`StripeLock`). On
/// two cores, threads that share a stripe are preempted inside it often enough to take the
/// contended path (spin, then sleep on the futex and be woken by the unlock).
extension RunLoopKitTests {
  @Suite("Timers' stripe locks under contention") struct StripeLockContention {
    /// Incremented only while stripe 7 is held.
    final class Tally: @unchecked Sendable {  // `count` is guarded by stripe 7
      var count = 0
    }

    @Test(
      "Threads that share a stripe exclude each other: 4 × 50 000 increments under it, none lost")
    func stripeExcludes() {
      let tally = Tally()
      let threads = (0..<4).map { _ in
        TestThread {
          let stripe = LockStripes.lock(for: 7)
          for _ in 0..<50_000 { stripe.withLock { tally.count += 1 } }
        }
      }
      for thread in threads { thread.join() }
      #expect(LockStripes.lock(for: 7).withLock { tally.count } == 200_000)
    }

    @Test(
      "Timers changed from two threads while their loop adds them: every valid timer is in the heap at its last date, no invalid one is"
    )
    func timersUnderContention() throws {
      let far = LoopClock.Instant.now.advanced(by: .seconds(3600))
      let timers = try (0..<4_000).map { _ in try LoopTimer(fireAt: far) { _ in } }
      let moved = far.advanced(by: .seconds(60))
      let checks = try onLoopThread { loop in
        // One thread invalidates every even timer, the other moves every odd one, while this
        // thread adds them all: adds, cancels and re-keyings meet on the same stripes.
        let invalidator = TestThread {
          for index in stride(from: 0, to: timers.count, by: 2) { timers[index].invalidate() }
        }
        let mover = TestThread {
          for index in stride(from: 1, to: timers.count, by: 2) { timers[index].fireDate = moved }
        }
        for timer in timers {
          do throws(LoopError) {
            try loop.add(timer, to: .default)
          } catch {
            #expect(error == .invalidated(item: "LoopTimer"), "only an invalid timer is refused")
          }
        }
        invalidator.join()
        mover.join()
        let heap = loop.lock.withLock { loop.modeStates[.default]?.timers }
        let entries = loop.lock.withLock { heap?.entries ?? [] }
        let inHeap = Set(entries.map { ObjectIdentifier($0.timer) })
        let valid = timers.filter(\.isValid)
        let checks = [
          valid.count == timers.count / 2,
          inHeap == Set(valid.map(ObjectIdentifier.init)),
          valid.allSatisfy { $0.fireDate == moved },
          entries.allSatisfy { $0.fireDate == moved },
          loop.lock.withLock { heap.map(heapIndicesAreRecorded) ?? false },
        ]
        for timer in valid { timer.invalidate() }
        return checks + [loop.lock.withLock { heap?.count == 0 }]
      }
      #expect(checks == [true, true, true, true, true, true])
    }
  }
}
