import Glibc
import Testing

@testable import RunLoopKit

/// A scenario with a bit of everything — a repeating timer, a one-shot timer that writes a
/// pipe, the pipe's source, a manual source, blocks, an observer and a nested run — whose
/// events are at least 100 ms apart. Returns the callouts in the order they ran; with
/// `tracer`, the loop is traced.
func runScenario(on loop: Loop, drive: (Duration) -> Void, tracer: LoopTracer? = nil) throws
  -> [String]
{
  var log: [String] = []
  let pipe = makePipe()
  defer {
    close(pipe.read)
    close(pipe.write)
  }
  if let tracer { try tracer.attach(to: loop) }
  defer { tracer?.detach() }
  var cleanup: [() -> Void] = []
  try loop.asCurrentForScenario {
    let view = loop.assumeIsolated()
    let manual = try view.addManualSource(label: "manual") { log.append("manual source") }
    let source = try view.addSource(fileDescriptor: pipe.read, label: "pipe") { _, _ in
      drain(pipe.read)
      log.append("pipe read")
      manual.signal()
    }
    let tick = try view.addTimer(
      label: "tick", after: .milliseconds(200), repeating: .milliseconds(200)
    ) {
      timer in
      log.append("tick")
      if log.filter({ $0 == "tick" }).count == 3 { timer.invalidate() }
    }
    try view.addTimer(label: "writer", after: .milliseconds(300)) { _ in
      log.append("writer")
      writeByte(pipe.write)
    }
    try view.addTimer(label: "modal", after: .milliseconds(450)) { _ in
      log.append("modal begins")
      _ = try? Loop.current.assumeIsolated().addTimer(
        label: "in modal", after: .milliseconds(100), to: "modal"
      ) {
        _ in log.append("in modal")
      }
      Loop.current.run(in: "modal", for: .milliseconds(200))
      log.append("modal ends")
    }
    try view.perform { log.append("block") }
    cleanup = [{ manual.invalidate() }, { source.invalidate() }, { tick.invalidate() }]
  }
  drive(.milliseconds(900))
  for step in cleanup { step() }
  return log
}

extension Loop {
  /// On a virtual loop, runs `body` as its thread (`VirtualLoop.asCurrent`); on a thread's own
  /// loop, runs it as it is.
  fileprivate func asCurrentForScenario(_ body: () throws -> Void) throws {
    guard let virtualClock else { return try body() }
    try virtualClock.driving(self, body)
  }
}

extension RunLoopKitTests {
  @Suite("Virtual time: scenarios") struct VirtualScenarios {
    @Test("80. The same scenario on two virtual loops gives identical callouts and traces")
    func test_80_identicalRuns() throws {
      func once() throws -> ([String], String, [LoopTracer.Event]) {
        let virtual = VirtualLoop()
        let tracer = LoopTracer()
        let log = try runScenario(
          on: virtual.loop, drive: { virtual.advance(by: $0) }, tracer: tracer)
        return (log, tracer.timeline(), tracer.events)
      }
      let first = try once()
      let second = try once()
      #expect(first.0 == second.0)
      #expect(first.1 == second.1, "byte-identical timelines")
      #expect(first.2 == second.2)
      #expect(first.1.contains("slept 100.00 ms, woken by timer"), "\(first.1)")
    }

    @Test("Differential: a scenario's callouts come in the same order on a real loop")
    func test_differentialRealAndVirtual() throws {
      let virtual = VirtualLoop()
      let simulated = try runScenario(on: virtual.loop, drive: { virtual.advance(by: $0) })
      let real = try onLoopThread { loop in
        try runScenario(on: loop, drive: { loop.run(for: $0) })
      }
      #expect(
        simulated == [
          "block", "tick", "writer", "pipe read", "manual source", "tick", "modal begins",
          "in modal", "modal ends", "tick",
        ])
      #expect(real == simulated)
    }

    @Test("81. A written pipe is handled during advance and runUntilIdle, with no real wait")
    func test_81_pipeDuringAdvance() throws {
      let virtual = VirtualLoop()
      let start = virtual.now
      let pipe = makePipe()
      defer {
        close(pipe.read)
        close(pipe.write)
      }
      var reads: [Int64] = []
      let loop = virtual.loop
      let view = loop.assumeIsolated()
      try view.addSource(fileDescriptor: pipe.read) { _, _ in
        drain(pipe.read)
        reads.append(milliseconds(loop.now, since: start))
      }
      try view.addTimer(after: .seconds(30)) { _ in writeByte(pipe.write) }
      writeByte(pipe.write)
      let wallStart = LoopClock.Instant.now
      virtual.advance(by: .seconds(3600))
      #expect(reads == [0, 30_000], "before any time passed, then right after the timer")
      #expect(elapsed(since: wallStart) < .seconds(10), "no real wait for the hour")
      writeByte(pipe.write)
      virtual.runUntilIdle()
      #expect(reads == [0, 30_000, 3_600_000])
    }

    @Test("Acceptance: a 300 ms debounce does not fire at 299 ms and fires once at 300 ms")
    func test_debounce() throws {
      let virtual = VirtualLoop()
      var fired = 0
      // ThreadBoundState.md's Debouncer, unchanged: it finds its loop through Loop.current.
      let debouncer = Debouncer(delay: .milliseconds(300)) { fired += 1 }
      try virtual.asCurrent {
        try debouncer.input()
      }
      virtual.advance(by: .milliseconds(100))
      try virtual.asCurrent { try debouncer.input() }
      virtual.advance(by: .milliseconds(299))
      #expect(fired == 0)
      virtual.advance(by: .milliseconds(1))
      #expect(fired == 1)
      virtual.advance(by: .seconds(10))
      #expect(fired == 1, "once")
    }

    @Test("Auto-advance: an unmodified run(for:) goes through an hour of timers at once")
    func test_autoAdvance() throws {
      let virtual = VirtualLoop(autoAdvance: true)
      let start = virtual.now
      var minutes = 0
      let result = try virtual.asCurrent {
        // What a program does: add a timer to the current loop and run it for an hour.
        try Loop.current.assumeIsolated().addTimer(after: .seconds(60), repeating: .seconds(60)) {
          _ in minutes += 1
        }
        return Loop.current.run(in: .default, for: .seconds(3600))
      }
      #expect(result == .timedOut)
      #expect(minutes == 60)
      #expect(virtual.now == start.advanced(by: .seconds(3600)))
    }

    @Test("Without auto-advance, a run that would sleep past what it was told traps, saying so")
    func test_runPastHorizonTraps() async {
      let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
        func runAnHour() throws {
          let virtual = VirtualLoop()
          try virtual.asCurrent {
            try Loop.current.assumeIsolated().addTimer(after: .seconds(60)) { _ in }
            Loop.current.run(in: .default, for: .seconds(3600))
          }
        }
        try runAnHour()
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(message.contains("would sleep until t+60.0 seconds"), "\(message)")
      #expect(message.contains("advance(by:)"), "says what to do")
      #expect(message.contains("autoAdvance: true"))
    }

    @Test("A second thread that drives a virtual loop while one does traps, naming the rule")
    func test_oneDriverAtATime() async {
      let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
        func driveFromTwoThreads() throws {
          let virtual = VirtualLoop()
          try virtual.loop.assumeIsolated().addTimer(after: .seconds(1)) { _ in
            let other = TestThread { virtual.runUntilIdle() }
            other.join()
          }
          virtual.advance(by: .seconds(1))
        }
        try driveFromTwoThreads()
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(message.contains("driven by one thread at a time"), "\(message)")
    }

    @Test("Loop.current answers the virtual loop only while a thread drives it")
    func test_currentWhileDriving() throws {
      let own = Loop.current
      let virtual = VirtualLoop()
      #expect(Loop.current === own)
      #expect(virtual.asCurrent { Loop.current } === virtual.loop)
      let inside = Box<Loop?>(nil)
      try virtual.loop.perform { inside.value = Loop.current }
      virtual.runUntilIdle()
      #expect(inside.value === virtual.loop)
      #expect(Loop.current === own, "the thread's own loop answers again")
      #expect(virtual.loop.isCurrent, "the owner thread may use assumeIsolated between drives")
      #expect(!own.isCurrent || own === Loop.current)
    }

    @Test("Dropping a VirtualLoop runs the blocks it accepted, then tears its loop down")
    func test_teardown() throws {
      let log = Recorder()
      var loop: Loop?
      do {
        let virtual = VirtualLoop()
        loop = virtual.loop
        try virtual.loop.perform { log.log("accepted") }
      }
      #expect(log.all == ["accepted"])
      #expect(throws: LoopError.self) { try loop?.perform {} }
    }
  }
}
