import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// Issue 28, defects 4 and 5, and the queue and wake-up findings that came with them: work
/// for no mode is refused; whatever makes queued work runnable in the mode being run wakes the
/// loop; blocks for another mode wait without being copied on every pass; a wake-up written
/// late never turns into a wake-up nobody asked for.
extension RunLoopKitTests {
  @Suite("Work becoming runnable") struct RunnableWork {
    @Test(
      "Defect 4: perform for no mode, or for a mode with an empty name, is refused as perform(after:) refuses it"
    )
    func performForNoModeIsRefused() throws {
      let noModes = LoopError.invalidArgument(
        name: "modes", value: "[]", reason: "a block needs at least one mode to run in")
      let queued = try onLoopThread { loop -> Int in
        #expect(throws: noModes) { try loop.perform(in: []) {} }
        #expect(throws: LoopError.invalidMode(name: "")) { try loop.perform(in: "") {} }
        #expect(throws: LoopError.invalidMode(name: "")) {
          try loop.perform(in: [.default, ""]) {}
        }
        #expect(throws: noModes) { try loop.perform(after: .zero, in: []) {} }
        #expect(throws: LoopError.invalidMode(name: "")) {
          try loop.perform(after: .zero, in: [""]) {}
        }
        return loop.lock.withLock { loop.queuedBlockCountLocked }
      }
      #expect(queued == 0)
    }

    @Test(
      "Defect 5: a .common block kept while the loop sleeps in mode B runs as soon as B joins the common modes"
    )
    func addingCommonModeWakesForQueuedBlock() throws {
      let waits = Counter()
      let ran = Box<Loop.Mode?>(nil)
      let result = Box<Loop.RunResult?>(nil)
      let thread = LoopThread { loop in result.value = loop.run(in: "B", for: .seconds(5)) }
      let loop = thread.loop
      try loop.add(ManualSource {}, to: "B")
      try loop.add(LoopObserver(activities: .beforeWaiting) { _, _ in waits.increment() }, to: "B")
      thread.start()
      #expect(waitUntil { loop.isWaiting && waits.value == 1 })
      try loop.perform(in: .common) {
        ran.value = Loop.current.currentMode
        Loop.current.stop()
      }
      // Woken, it keeps the block (B is not common yet) and goes back to sleep.
      #expect(waitUntil { loop.isWaiting && waits.value == 2 })
      #expect(ran.value == nil)
      let start = LoopClock.Instant.now
      try loop.addCommonMode("B")
      thread.join()
      #expect(ran.value == "B")
      #expect(result.value == .stopped)
      #expect(elapsed(since: start) < .seconds(4), "the block waited for the run's deadline")
    }

    @Test(
      "Defect 5: a source signalled before it joins the mode being run wakes the loop, added to that mode or to .common",
      arguments: ["B", "common"])
    func addingSignalledSourceWakes(target: String) throws {
      let waits = Counter()
      let result = Box<Loop.RunResult?>(nil)
      let thread = LoopThread { loop in result.value = loop.run(in: "B", for: .seconds(5)) }
      let loop = thread.loop
      try loop.addCommonMode("B")
      try loop.add(ManualSource {}, to: "B")
      try loop.add(LoopObserver(activities: .beforeWaiting) { _, _ in waits.increment() }, to: "B")
      thread.start()
      #expect(waitUntil { loop.isWaiting && waits.value == 1 })
      let performed = Counter()
      let source = ManualSource {
        performed.increment()
        Loop.current.stop()
      }
      source.signal()
      let start = LoopClock.Instant.now
      try loop.add(source, to: Loop.Mode(target))
      thread.join()
      #expect(performed.value == 1)
      #expect(result.value == .stopped)
      #expect(elapsed(since: start) < .seconds(4), "the signalled source waited for the deadline")
    }

    @Test(
      "Blocks for a mode that is not running are set aside once, not copied back on every pass, and keep their order"
    )
    func blocksForOtherModesAreSetAsideOnce() throws {
      let order = Recorder()
      let (setAside, passes) = try onLoopThread { loop -> (UInt64, UInt64) in
        try loop.add(ManualSource {}, to: .default)
        for index in 0..<1000 { try loop.perform(in: "X") { order.log("x\(index)") } }
        let before = loop.metrics.passes
        for _ in 0..<50 { loop.run(for: .zero) }
        try loop.perform(in: .common) { order.log("common") }
        try loop.perform(in: "X") { order.log("x-last") }
        loop.run(for: .zero)  // runs "common"; "x-last" waits behind the others
        let passes = loop.metrics.passes - before
        #expect(loop.run(in: "X", for: .seconds(5)) == .finished)
        return (loop.lock.withLock { loop.blocksSetAside }, passes)
      }
      #expect(passes == 51)
      #expect(setAside == 1001, "blocks for X were set aside again and again")
      #expect(order.all == ["common"] + (0..<1000).map { "x\($0)" } + ["x-last"])
    }

    @Test(
      "A wake-up written for an epoll sleep that lands while the loop sleeps on its futex is drained, not taken for a later wake-up"
    )
    func lateEventfdWriteIsNotASpuriousWake() throws {
      let pipe = makePipe()
      defer {
        close(pipe.read)
        close(pipe.write)
      }
      let poster = Box<(arrived: Gate, release: Gate)?>(nil)
      let written = Gate()
      let spurious = Box<UInt64?>(nil)
      let thread = LoopThread { loop in
        loop.run(in: "A", for: .seconds(5))  // ends when the pipe's handler stops it
        // B watches no descriptor: its run sleeps on the futex, after its first pass has
        // prepared to wait; the held write lands in between, from the timer's handler.
        let timer = try? LoopTimer(after: .zero) { _ in
          poster.value?.release.open()
          written.wait()
        }
        if let timer { try? loop.add(timer, to: "B") }
        loop.run(in: "B", for: .milliseconds(60))
        let before = loop.metrics.wakes.wakeUp
        loop.run(in: "A", for: .milliseconds(200))
        spurious.value = loop.metrics.wakes.wakeUp - before
      }
      let loop = thread.loop
      // A watches a descriptor, so the loop sleeps there in epoll_wait.
      let source = DescriptorSource(fileDescriptor: pipe.read) { _, _ in
        drain(pipe.read)
        Loop.current.stop()
      }
      try loop.add(source, to: "A")
      try loop.add(ManualSource {}, to: "B")
      poster.value = holdAt(.wakeWriteDecided, for: loop)
      defer { TestPausePoint.disarm(.wakeWriteDecided, for: loop) }
      thread.start()
      #expect(waitUntil { loop.isWaiting })
      let posterThread = TestThread {
        // The loop sleeps in epoll: this post decides an eventfd write, then is held.
        try? loop.perform(in: "A") {}
        written.open()
      }
      #expect(poster.value?.arrived.wait() == true)
      writeByte(pipe.write)  // wakes the loop another way; the write is still held
      posterThread.join()
      thread.join()
      #expect(
        spurious.value == 0,
        "the late write ended a later epoll sleep that nobody had asked to end")
    }
  }
}
