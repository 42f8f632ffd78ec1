import Dispatch
import Glibc
import Testing

@testable import RunLoopKit

/// Issue 44, defects 6 and 7 (checklist lines 100 and 101): what a loop accepted is done
/// before it ends — a signal and a port message made just before a resident thread's stop
/// included — and no drain writes to storage another thread shares.
extension RunLoopKitTests {
  @Suite("A loop's final drain does everything it accepted") struct FinalDrain {
    /// Holds `thread` in a timer's callout, which comes after its pass's sources phase and
    /// its wait, runs `lastWork` and `stop()` meanwhile, then lets it go and joins it: what
    /// `lastWork` signals or sends is seen by no later phase of that pass, and the stop block,
    /// run by the pass's last drain of blocks, ends the run right after.
    static func stopWhileInATimersCallout(
      _ thread: ResidentThread, _ lastWork: () throws -> Void
    ) throws {
      let inCallout = Gate()
      let release = Gate()
      try thread.loop.add(
        try LoopTimer(after: .zero) { _ in
          inCallout.open()
          _ = release.wait(seconds: 30)
        }, to: .default)
      #expect(inCallout.wait(seconds: 30))
      try lastWork()
      thread.stop()
      release.open()
      try thread.join()
    }

    @Test(
      "100. A source signalled and a port message sent just before stop(), after the pass looked, are performed and delivered before join() returns"
    )
    func test_100_signalAndSendJustBeforeStop() throws {
      let thread = try ResidentThread(name: "last-work")
      let performed = Counter()
      let delivered = Recorder()
      let source = ManualSource(label: "last signal") { _ = performed.increment() }
      let port = try LoopPort<String>(label: "last message") { delivered.log($0) }
      try thread.loop.add(source, to: .default)
      try thread.loop.add(port, to: .default)
      try Self.stopWhileInATimersCallout(thread) {
        source.signal()  // a plain signal, as a libuv benchmark's worker makes its last one
        try port.send("last")
      }
      #expect(performed.value == 1, "the signal accepted before stop() was performed")
      #expect(delivered.all == ["last"], "the message accepted before stop() was delivered")
      #expect(port.pendingCount == 0)
      #expect(throws: LoopError.self) { try port.send("after") }
    }

    @Test(
      "100. A source that signals itself from its perform is performed once by the final drain, which then ends"
    )
    func test_100_selfSignallingSourceDoesNotHoldTheDrain() throws {
      let thread = try ResidentThread(name: "pump")
      let performed = Counter()
      let itself = Box<ManualSource?>(nil)
      let modes = Recorder()
      let pump = ManualSource(label: "pump") {
        _ = performed.increment()
        modes.log("\(Loop.current.currentMode?.name ?? "none")")
        itself.value?.signal()
      }
      itself.value = pump
      try thread.loop.add(pump, to: .default)
      try Self.stopWhileInATimersCallout(thread) { pump.signal() }
      #expect(performed.value == 1, "\(modes.all)")
    }

    @Test(
      "100. A thread that exits with a signalled source and a port message waiting performs and delivers them, in order; a port in no mode keeps its messages for invalidate()"
    )
    func test_100_threadExitPerformsAndDelivers() throws {
      let log = Recorder()
      let kept = try LoopPort<Int> { log.log("kept \($0)") }
      let late = Box<String>("")
      try onLoopThread { loop in
        let second = ManualSource(label: "second", order: 2) { log.log("source order 2") }
        let first = ManualSource(label: "first", order: 1) { log.log("source order 1") }
        let port = try LoopPort<Int>(label: "port") { log.log("message \($0)") }
        try loop.add(second, to: .default)
        try loop.add(first, to: "other")
        try loop.add(port, to: .default)
        try loop.add(kept, to: .default)
        loop.remove(kept, from: .default)  // in no mode: its messages wait for invalidate()
        second.signal()
        first.signal()
        try port.send(1)
        try port.send(2)
        try kept.send(7)
        // A block run by the final drain: ports refuse sends from its start.
        try loop.perform {
          do {
            try port.send(3)
            late.value = "accepted"
          } catch {
            late.value = "\(error)"
          }
        }
      }  // the thread exits without running its loop again
      #expect(
        log.all == ["source order 1", "source order 2", "message 1", "message 2"],
        "\(log.all)")
      #expect(late.value.contains("exited"), "\(late.value)")
      #expect(kept.invalidate() == [7])
    }
  }

  @Suite("Drains leave shared storage alone") struct DrainSharing {
    @Test(
      "101. Two resident threads each holding a block for a mode they never run take 20 000 posts each: every block runs, and (under ThreadSanitizer, which CI runs) no drain writes to storage the threads share"
    )
    func test_101_drainsOfTwoThreadsShareNothing() throws {
      let threads = try (0..<2).map { try ResidentThread(name: "drain-\($0)") }
      let ran = Counter()
      for thread in threads {
        try thread.loop.perform(in: "never run") {}
      }
      let posters = threads.map { thread in
        TestThread {
          for _ in 0..<20_000 { try? thread.perform { _ = ran.increment() } }
        }
      }
      for poster in posters { poster.join() }
      for thread in threads {
        thread.stop()
        try thread.join()
      }
      #expect(ran.value == 40_000)
    }

    @Test("101. An empty drain batch hands over an empty array without touching shared storage")
    func test_101_emptyBatchMovesToEmptyArray() {
      let batch = Loop.DrainBatch()
      #expect(batch.moveToArray().isEmpty)
      #expect(batch.count == 0)
    }
  }
}
