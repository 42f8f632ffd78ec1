import Dispatch
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// Waits up to `milliseconds` for `descriptor` to become readable, as a host loop would.
func isReadable(_ descriptor: Int32, within milliseconds: Int32) -> Bool {
  var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
  while true {
    let ready = poll(&entry, 1, milliseconds)
    if ready < 0 && errno == EINTR { continue }
    return ready > 0 && entry.revents & Int16(POLLIN) != 0
  }
}

extension RunLoopKitTests {
  @Suite("A loop embedded in another event loop") struct Embedding {
    @Test("95. A block posted from another thread makes the descriptor readable; runPass runs it")
    func test_95_postMakesDescriptorReadable() throws {
      let ran = try onLoopThread { loop -> [String] in
        let log = Recorder()
        let embedding = try loop.makeEmbedding()
        defer { embedding.invalidate() }
        #expect(!isReadable(embedding.descriptor, within: 0), "idle: nothing to do")
        DispatchQueue.global().async { try? loop.perform { log.log("posted") } }
        #expect(isReadable(embedding.descriptor, within: 10_000))
        embedding.runPass()
        #expect(!isReadable(embedding.descriptor, within: 0), "the pass took the work")
        return log.all
      }
      #expect(ran == ["posted"])
    }

    @Test("95. A timer coming due makes the descriptor readable, no earlier, at nextDeadline")
    func test_95_timerMakesDescriptorReadable() throws {
      let (fired, deadlineMatched, early) = try onLoopThread { loop -> (Bool, Bool, Bool) in
        let fired = Box(false)
        let embedding = try loop.makeEmbedding()
        defer { embedding.invalidate() }
        let timer = try LoopTimer(after: .milliseconds(300)) { _ in fired.value = true }
        // Added between passes, on the loop's thread, as host code would.
        try loop.add(timer, to: .default)
        let matched = embedding.nextDeadline == timer.fireDate
        let early = isReadable(embedding.descriptor, within: 0)
        #expect(isReadable(embedding.descriptor, within: 10_000))
        #expect(LoopClock.Instant.now >= timer.fireDate)
        embedding.runPass()
        return (fired.value, matched, early)
      }
      #expect(!early)
      #expect(deadlineMatched)
      #expect(fired)
    }

    @Test("95. A source signalled from another thread makes the descriptor readable")
    func test_95_signalMakesDescriptorReadable() throws {
      let performed = try onLoopThread { loop -> Int in
        let count = Box(0)
        let source = ManualSource { count.value += 1 }
        try loop.add(source, to: .default)
        defer { source.invalidate() }
        let embedding = try loop.makeEmbedding()
        defer { embedding.invalidate() }
        embedding.runPass()
        #expect(!isReadable(embedding.descriptor, within: 0))
        DispatchQueue.global().async { source.signal() }  // a plain signal, no wakeUp()
        #expect(isReadable(embedding.descriptor, within: 10_000))
        embedding.runPass()
        return count.value
      }
      #expect(performed == 1)
    }

    @Test(
      "95. runPass runs a post, a signalled source, a due timer and a ready descriptor in CF order, without sleeping"
    )
    func test_95_runPassInCFOrder() throws {
      let (log, slept) = try onLoopThread { loop -> ([String], Bool) in
        let log = Recorder()
        let pipe = makePipe()
        defer {
          close(pipe.read)
          close(pipe.write)
        }
        let source = ManualSource { log.log("source") }
        let reader = DescriptorSource(fileDescriptor: pipe.read) { _, _ in
          var byte: UInt8 = 0
          _ = read(pipe.read, &byte, 1)
          log.log("descriptor")
        }
        let observer = LoopObserver(activities: .all) { _, activity in
          log.log("\(activity)")
        }
        try loop.add(source, to: .default)
        try loop.add(reader, to: .default)
        try loop.add(observer, to: .default)
        defer {
          source.invalidate()
          reader.invalidate()
          observer.invalidate()
        }
        let embedding = try loop.makeEmbedding()
        defer { embedding.invalidate() }
        embedding.runPass()
        log.clear()
        try loop.add(LoopTimer(after: .zero) { _ in log.log("timer") }, to: .default)
        try loop.perform { log.log("block") }
        source.signal()
        var byte: UInt8 = 1
        _ = write(pipe.write, &byte, 1)
        #expect(isReadable(embedding.descriptor, within: 10_000))
        let start = LoopClock.Instant.now
        embedding.runPass()
        // No sleep: the pass took far less than the time a sleep could have lasted.
        return (log.all, start.duration(to: .now) > .seconds(5))
      }
      #expect(
        log == [
          "entry", "beforeTimers", "beforeSources", "block", "source", "timer", "descriptor",
          "exit",
        ])
      #expect(!slept)
    }

    @Test(
      "95. An idle embedded loop makes its descriptor readable for nothing, a distant timer included"
    )
    func test_95_idleCausesNoWakeUp() throws {
      let (readable, deadline, wakeUps) = try onLoopThread {
        loop -> (Bool, LoopClock.Instant?, UInt64) in
        let timer = try LoopTimer(after: .seconds(3600)) { _ in }
        try loop.add(timer, to: .default)
        defer { timer.invalidate() }
        let embedding = try loop.makeEmbedding()
        defer { embedding.invalidate() }
        embedding.runPass()
        let writes = loop.metrics.wakeUpWrites
        let readable = isReadable(embedding.descriptor, within: 300)
        return (readable, embedding.nextDeadline, loop.metrics.wakeUpWrites - writes)
      }
      #expect(!readable)
      #expect(deadline != nil)
      #expect(wakeUps == 0)
    }

    @Test(
      "95. Work the pass cannot take leaves the descriptor quiet afterwards: an empty mode woken, a block for another mode"
    )
    func test_95_noSpinOnWorkForNobody() throws {
      let (quietAfterWake, quietAfterOtherBlock, busy) = try onLoopThread {
        loop -> (Bool, Bool, Duration) in
        let embedding = try loop.makeEmbedding(in: "embedded")  // nothing in it: empty
        defer { embedding.invalidate() }
        DispatchQueue.global().async { loop.wakeUp() }
        #expect(isReadable(embedding.descriptor, within: 10_000))
        #expect(embedding.runPass() == .finished)
        let quietAfterWake = !isReadable(embedding.descriptor, within: 100)
        DispatchQueue.global().async { try? loop.perform(in: ["other"]) {} }
        #expect(isReadable(embedding.descriptor, within: 10_000))
        embedding.runPass()
        let quietAfterOtherBlock = !isReadable(embedding.descriptor, within: 100)
        return (quietAfterWake, quietAfterOtherBlock, loop.metrics.timeBusy)
      }
      #expect(quietAfterWake, "an empty mode's pass drains the wake-up")
      #expect(quietAfterOtherBlock, "a block for another mode does not keep the host busy")
      #expect(busy >= .zero, "time between passes is neither asleep nor running")
    }

    @Test(
      "95. pollTimeout is nextDeadline in whole milliseconds rounded up: -1 with no timer or a parked one, 0 once due"
    )
    func test_95_pollTimeout() throws {
      let (none, parked, distant, due) = try onLoopThread { loop -> (Int32, Int32, Int32, Int32) in
        let embedding = try loop.makeEmbedding()
        defer { embedding.invalidate() }
        let none = embedding.pollTimeout
        let timer = try LoopTimer(fireAt: .distantFuture, interval: .seconds(86_400)) { _ in }
        try loop.add(timer, to: .default)
        defer { timer.invalidate() }
        let parked = embedding.pollTimeout
        timer.fireDate = LoopClock.now.advanced(by: .seconds(3600))
        let distant = embedding.pollTimeout
        timer.fireDate = LoopClock.now.advanced(by: .milliseconds(-5))
        return (none, parked, distant, embedding.pollTimeout)
      }
      #expect(none == -1)
      #expect(parked == -1, "a timer parked at .distantFuture is no deadline")
      #expect(distant > 3_500_000 && distant <= 3_600_000)
      #expect(due == 0)
      let now = LoopClock.Instant(nanoseconds: 1_000_000_000)
      #expect(LoopEmbedding.milliseconds(from: now, to: now.advanced(by: .nanoseconds(1))) == 1)
      #expect(LoopEmbedding.milliseconds(from: now, to: now.advanced(by: .milliseconds(2))) == 2)
      #expect(LoopEmbedding.milliseconds(from: now, to: .distantFuture) == .max)
      #expect(LoopEmbedding.milliseconds(from: .distantFuture, to: now) == 0)
    }

    @Test("95. One embedding per loop, of one named mode; invalidate gives the loop back")
    func test_95_rulesAndInvalidate() throws {
      let fired = try onLoopThread { loop -> Bool in
        #expect(throws: LoopError.self) { _ = try loop.makeEmbedding(in: .common) }
        let embedding = try loop.makeEmbedding()
        #expect(throws: LoopError.self) { _ = try loop.makeEmbedding(in: "other") }
        embedding.invalidate()
        embedding.invalidate()
        #expect(embedding.runPass() == .finished, "an invalidated embedding runs nothing")
        // The loop runs as before, asleep on its futex until its timer.
        let fired = Box(false)
        try loop.add(LoopTimer(after: .milliseconds(10)) { _ in fired.value = true }, to: .default)
        loop.run(for: .seconds(10))
        return fired.value
      }
      #expect(fired)
    }
  }
}
