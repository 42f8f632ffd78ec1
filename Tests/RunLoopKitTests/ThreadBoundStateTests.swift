import CRunLoopShims
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// Plain mutable state with no `Sendable` conformance of any kind: what a user's connection,
/// database handle or result set looks like to the compiler.
final class PlainCounter {
  var count = 0
  var onThreads: Set<pid_t> = []
  func bump() {
    count += 1
    onThreads.insert(crl_gettid())
  }
}

extension RunLoopKitTests {
  @Suite("Thread-bound state and delayed work") struct ThreadBoundState {
    @Test("65. LoopBound and LoopBoundBox hand their value out on the owning loop's thread")
    func test_65_loopBoundOnThread() throws {
      let thread = try ResidentThread(name: "owner")
      // Made on the thread it belongs to, then shared by two callbacks and read back.
      let box = try thread.performAndWait { LoopBoundBox(PlainCounter(), loop: .current) }
      let timer = try LoopTimer(after: .zero) { _ in box.value.bump() }
      try thread.loop.add(timer, to: .common)
      try thread.perform { box.value.bump() }
      #expect(waitUntil { (try? thread.performAndWait { box.value.count }) == 2 })
      // Handed over from this thread with `sending`: nothing here refers to it afterwards.
      let handed = LoopBound(sending: PlainCounter(), to: thread)
      let (count, threads) = try thread.performAndWait { () -> (Int, Set<pid_t>) in
        handed.value.bump()
        return (handed.value.count, handed.value.onThreads)
      }
      #expect(count == 1)
      #expect(threads == [thread.threadID])
      let empty = LoopBoundBox<PlainCounter?>(emptyOn: thread.loop)
      try thread.performAndWait { empty.value = PlainCounter() }
      #expect(try thread.performAndWait { empty.value != nil })
      #expect(try thread.performAndWait { thread.loop.isCurrent })
      #expect(!thread.loop.isCurrent)
    }

    @Test("65. LoopBound traps anywhere else, with a message naming both threads")
    func test_65_loopBoundOffThreadTraps() async {
      let result = await #expect(
        processExitsWith: .failure, observing: [\.standardErrorContent]
      ) {
        let thread = try ResidentThread(name: "owner")
        let bound = LoopBound(sending: PlainCounter(), to: thread)
        _ = bound.value.count
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(
        message.contains("reading LoopBound<PlainCounter>.value must run on the loop of thread"))
      #expect(message.contains("\"owner\""))
      #expect(message.contains("but ran on thread"))
      #expect(message.contains("loop.perform"))
    }

    @Test("65. A LoopBoundBox made off its thread with init(_:loop:) traps, naming both threads")
    func test_65_boxInitOffThreadTraps() async {
      let result = await #expect(
        processExitsWith: .failure, observing: [\.standardErrorContent]
      ) {
        let thread = try ResidentThread(name: "owner")
        _ = LoopBoundBox(PlainCounter(), loop: thread.loop)
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(
        message.contains(
          "LoopBoundBox<PlainCounter>.init(_:loop:) must run on the loop of thread "),
        "\(message)")
      #expect(message.contains("\"owner\""))
      #expect(message.contains("but ran on thread"))
    }

    @Test(
      "66. Work handed to a loop may capture a non-Sendable value the caller no longer uses")
    func test_66_sendingClosures() async throws {
      // Each closure below captures its own PlainCounter, a class with no Sendable
      // conformance: this file compiling under Swift 6 is half of the test.
      let thread = try ResidentThread(name: "handover")
      let loop = thread.loop
      let done = Recorder()
      let report: @Sendable (String, Int, Set<pid_t>) -> Void = { name, count, threads in
        done.log("\(name) \(count) \(threads == [thread.threadID] ? "on thread" : "elsewhere")")
      }

      let forPerform = PlainCounter()
      try loop.perform {
        forPerform.bump()
        report("perform", forPerform.count, forPerform.onThreads)
      }
      let forTimer = PlainCounter()
      try loop.add(
        LoopTimer(after: .milliseconds(1)) { _ in
          forTimer.bump()
          report("timer", forTimer.count, forTimer.onThreads)
        }, to: .common)
      let forSource = PlainCounter()
      let source = ManualSource {
        forSource.bump()
        report("source", forSource.count, forSource.onThreads)
      }
      try loop.add(source, to: .common)
      source.signalAndWake()
      let pipe = makePipe()
      defer {
        close(pipe.read)
        close(pipe.write)
      }
      let forDescriptor = PlainCounter()
      let descriptor = DescriptorSource(fileDescriptor: pipe.read) { source, _ in
        forDescriptor.bump()
        report("descriptor", forDescriptor.count, forDescriptor.onThreads)
        source.invalidate()
      }
      try loop.add(descriptor, to: .common)
      _ = write(pipe.write, "x", 1)
      let forDelayed = PlainCounter()
      try thread.perform(after: .milliseconds(1)) {
        forDelayed.bump()
        report("delayed", forDelayed.count, forDelayed.onThreads)
      }
      let forRun = PlainCounter()
      let ran = try await thread.run {
        forRun.bump()
        return forRun.count
      }
      #expect(ran == 1)
      #expect(waitUntil { done.all.count == 5 })
      #expect(
        Set(done.all) == [
          "perform 1 on thread", "timer 1 on thread", "source 1 on thread",
          "descriptor 1 on thread", "delayed 1 on thread",
        ])
      source.invalidate()
    }

    @Test("67. perform(after:) runs once, on the loop's thread, no earlier than the delay")
    func test_67_performAfterRunsOnce() throws {
      let thread = try ResidentThread(name: "delayed")
      let recorder = Recorder()
      let start = LoopClock.Instant.now
      let ranAt = Box<LoopClock.Instant?>(nil)
      let handle = try thread.perform(after: .milliseconds(50)) {
        ranAt.value = .now
        recorder.log(thread.isCurrent ? "ran on thread" : "ran elsewhere")
      }
      #expect(handle.deadline >= start.advanced(by: .milliseconds(50)))
      #expect(waitUntil { handle.state == .ran })
      #expect(try #require(ranAt.value) >= start.advanced(by: .milliseconds(50)))
      #expect(recorder.all == ["ran on thread"])
      #expect(handle.cancel() == false)  // it has run: cancel says so
      #expect(handle.state == .ran)
      // The same from a plain Loop, with a deadline instead of a delay, and a negative delay.
      let soon = try thread.loop.perform(at: .now.advanced(by: .milliseconds(5))) {
        recorder.log("at")
      }
      let now = try thread.loop.perform(after: .seconds(-5)) { recorder.log("negative") }
      #expect(waitUntil { soon.state == .ran && now.state == .ran })
      #expect(recorder.count(of: "at") == 1 && recorder.count(of: "negative") == 1)
    }

    @Test("67. cancel() before the run prevents it and says so")
    func test_67_cancelPrevents() throws {
      let virtual = VirtualLoop()
      let recorder = Recorder()
      try virtual.loop.add(ManualSource {}, to: .default)  // keeps the mode alive
      let handle = try virtual.loop.perform(after: .milliseconds(100)) { recorder.log("ran") }
      #expect(handle.cancel() == true)
      #expect(handle.cancel() == true)  // still will not run
      #expect(handle.state == .cancelled)
      // Past its deadline, with the loop turning: nothing ran.
      virtual.advance(by: .milliseconds(200))
      #expect(virtual.loop.metrics.passes > 0)
      #expect(recorder.all.isEmpty)
      #expect(!handle.timer.isValid)
    }

    @Test(
      "67. A cancel racing the run either prevents it or reports that it ran: 10 000 rounds, none lost or doubled"
    )
    func test_67_cancelRace() throws {
      let thread = try ResidentThread(name: "race")
      let rounds = 10_000
      let ran = RunCounts(rounds)
      var handles: [ScheduledBlock] = []
      var cancelled: [Bool] = []
      handles.reserveCapacity(rounds)
      for round in 0..<rounds {
        // Both outcomes, whatever the machine's load: one round in a hundred the loop is held
        // in a block while the cancel is made (the cancel wins), one waits for the run (the
        // run wins); the others race, some after a yield to let the loop get there first.
        let held = round % 100 == 1 ? Gate() : nil
        if let held { try thread.perform { held.wait(seconds: 30) } }
        let handle = try thread.perform(after: .zero) { ran.mark(round) }
        if round % 100 == 0 { _ = waitUntil(seconds: 30) { handle.state != .pending } }
        if round % 3 == 0 { sched_yield() }
        cancelled.append(handle.cancel())
        held?.open()
        handles.append(handle)
      }
      #expect(waitUntil(seconds: 30) { handles.allSatisfy { $0.state != .pending } })
      try thread.performAndWait {}
      var lost = 0
      var doubled = 0
      for round in 0..<rounds {
        let runs = ran.count(round)
        if cancelled[round] && runs > 0 || runs > 1 { doubled += 1 }
        if !cancelled[round] && runs == 0 { lost += 1 }
        #expect((handles[round].state == .ran) == (runs == 1))
      }
      #expect(lost == 0)
      #expect(doubled == 0)
      let cancelledCount = cancelled.filter { $0 }.count
      #expect(cancelledCount + ran.total == rounds)
      // Both sides of the race were seen (forced one round in a hundred each).
      #expect(cancelledCount >= rounds / 100)
      #expect(ran.total >= rounds / 100)
    }

    @Test("67. A stopped thread refuses delayed work; one still waiting is abandoned, not lost")
    func test_67_stoppedThread() throws {
      let thread = try ResidentThread(name: "stopping")
      let recorder = Recorder()
      let waiting = try thread.perform(after: .seconds(60)) { recorder.log("ran") }
      thread.stop()
      try thread.join()
      #expect(waiting.state == .abandoned)
      #expect(waiting.cancel() == true)  // it will not run
      #expect(throws: LoopError.stopped(thread: "stopping")) {
        try thread.perform(after: .zero) { recorder.log("late") }
      }
      let dead = try onLoopThread { loop in loop }
      #expect(throws: LoopError.loopTornDown(thread: dead.threadDescription)) {
        try dead.perform(after: .zero) {}
      }
      #expect(recorder.all.isEmpty)
    }

    @Test(
      "67. perform(at:) in several modes either throws with the block never run, or runs it once"
    )
    func test_67_severalModesAllOrNothing() throws {
      let thread = try ResidentThread(name: "modes")
      let ran = RunCounts(200)
      var refused = 0
      for round in 0..<200 {
        // A deadline already past, and a second mode that cannot be used: the loop must not
        // get to run the block between the first add and the refusal.
        do {
          try thread.loop.perform(at: .now.advanced(by: .seconds(-1)), in: [.default, ""]) {
            ran.mark(round)
          }
        } catch {
          refused += 1
        }
      }
      let good = try thread.loop.perform(after: .zero, in: [.default, "other"]) {
        ran.mark(0)
      }
      #expect(waitUntil { good.state == .ran })
      try thread.performAndWait {}
      #expect(refused == 200)
      #expect(ran.total == 1)
    }

    @Test("loop.preconditionIsCurrent passes on the loop's thread and traps elsewhere")
    func preconditionIsCurrent() async throws {
      let thread = try ResidentThread(name: "checked")
      try thread.performAndWait { thread.loop.preconditionIsCurrent() }
      let result = await #expect(
        processExitsWith: .failure, observing: [\.standardErrorContent]
      ) {
        let thread = try ResidentThread(name: "checked")
        thread.loop.preconditionIsCurrent("saving the document")
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(message.contains("saving the document must run on the loop of thread"))
      #expect(message.contains("\"checked\""))
    }
  }
}

/// How many times each round's block ran, from the loop's thread, read by the test's.
final class RunCounts: @unchecked Sendable {  // `counts` is guarded by `lock`
  private let lock = NSLock()
  private var counts: [Int]
  init(_ rounds: Int) { counts = Array(repeating: 0, count: rounds) }
  func mark(_ round: Int) { lock.withLock { counts[round] += 1 } }
  func count(_ round: Int) -> Int { lock.withLock { counts[round] } }
  var total: Int { lock.withLock { counts.reduce(0, +) } }
}
