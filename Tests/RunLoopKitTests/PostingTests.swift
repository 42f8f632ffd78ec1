import Foundation
import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Posting and re-entrant callbacks") struct Posting {
    @Test("Posting to a busy loop costs no eventfd write, and one pass drains everything queued")
    func test_postingToBusyLoopIsFree() throws {
      let ran = Box(0)
      let passes = Box(0)
      let release = Gate()  // bounded waits: a wrong interleaving fails, never hangs
      let entered = Gate()
      let thread = LoopThread { loop in
        loop.run(for: .seconds(10))
      }
      let loop = thread.loop
      try loop.add(ManualSource {}, to: .default)
      try loop.add(
        LoopObserver(activities: .beforeSources) { _, _ in passes.value += 1 }, to: .default)
      try loop.perform {
        entered.open()
        release.wait()  // keep the loop busy while the test posts
      }
      thread.start()
      entered.wait()
      let writesBefore = loop.lock.withLock { loop.wakeWrites }
      let passesBefore = passes.value
      for _ in 0..<10_000 { try loop.perform { ran.value += 1 } }
      let writesWhileBusy = loop.lock.withLock { loop.wakeWrites } - writesBefore
      release.open()
      #expect(waitUntil { ran.value == 10_000 })
      try loop.perform { loop.stop() }
      thread.join()
      #expect(writesWhileBusy == 0)
      // The busy block ran in the first drain; the 10 000 posted during it need one more pass
      // (or two, if the post-wait drain of that pass already took them).
      #expect(passes.value - passesBefore <= 3)
    }

    @Test("Blocks posted by 4 threads all run exactly once, in order per poster")
    func test_fourPostersFIFO() throws {
      let perPoster = 5_000
      let seen = Box<[[Int]]>(Array(repeating: [], count: 4))
      let thread = LoopThread { loop in
        loop.run(for: .seconds(60))
      }
      let loop = thread.loop
      try loop.add(ManualSource {}, to: .default)
      thread.start()
      let posters = (0..<4).map { poster in
        TestThread {
          for index in 0..<perPoster {
            try? loop.perform { seen.value[poster].append(index) }
          }
        }
      }
      for poster in posters { poster.join() }
      #expect(waitUntil(seconds: 30) { seen.value.allSatisfy { $0.count == perPoster } })
      try loop.perform { loop.stop() }
      thread.join()
      for list in seen.value { #expect(list == Array(0..<perPoster)) }
      let writes = loop.lock.withLock { loop.wakeWrites }
      #expect(writes < UInt64(4 * perPoster))
    }

    @Test("Callbacks may remove or invalidate anything, themselves included")
    func test_callbacksMayChangeTheLoop() throws {
      let recorder = Recorder()
      try onVirtualLoop { _, loop in
        try loop.add(ManualSource {}, to: .default)
        let victim = Box<ManualSource?>(nil)
        let selfRemoving = Box<ManualSource?>(nil)
        selfRemoving.value = ManualSource(order: 1) {
          recorder.log("self-removing")
          loop.remove(selfRemoving.value!, from: .default)
          victim.value!.invalidate()
          selfRemoving.value!.signal()  // not in the mode any more: must not run again here
        }
        victim.value = ManualSource(order: 2) { recorder.log("victim ran") }
        try loop.add(selfRemoving.value!, to: .default)
        try loop.add(victim.value!, to: .default)
        selfRemoving.value!.signal()
        victim.value!.signal()

        let observer = Box<LoopObserver?>(nil)
        observer.value = LoopObserver(activities: .beforeWaiting) { _, _ in
          recorder.log("observer removes itself")
          loop.remove(observer.value!, from: .default)
        }
        try loop.add(observer.value!, to: .default)
        let timer = try LoopTimer(after: .milliseconds(5)) { _ in
          recorder.log("timer adds a timer")
          try? loop.add(
            LoopTimer(after: .milliseconds(5)) { _ in recorder.log("added timer") }, to: .default)
        }
        try loop.add(timer, to: .default)
        loop.run(for: .milliseconds(200))
        // The items' closures hold their boxes: break the cycles.
        (victim.value, selfRemoving.value, observer.value) = (nil, nil, nil)
      }
      #expect(
        recorder.all == [
          "self-removing", "observer removes itself", "timer adds a timer", "added timer",
        ])
    }
  }
}
