import CRunLoopShims
import Glibc
import Testing

@testable import RunLoopKit

/// Issue 44, defect 1 (checklist line 96): a descriptor source's number is registered again —
/// in another mode, after a hang-up, in a rebuilt set — only while it still names the file the
/// source was made for. The reuse is forced with `dup2` onto the closed number, so no other
/// thread can take the number first.
extension RunLoopKitTests {
  @Suite("A source's descriptor is proven to be its own before it is registered again")
  struct WitnessedDescriptors {
    /// Closes `fd` (the last reference to its file) and puts a new pipe's read end on its
    /// number, with one byte waiting. Returns the pipe's write end.
    static func reuseAsReadablePipe(_ fd: Int32) -> Int32 {
      let pipe = makePipe()
      close(fd)
      precondition(dup2(pipe.read, fd) == fd)
      close(pipe.read)
      writeByte(pipe.write)
      return pipe.write
    }

    /// A common-mode eventfd source, the eventfd closed and its number reused by a readable
    /// pipe, then "tracking" made common (or the source added to it); the run of "tracking"
    /// that follows, and what the old source saw.
    struct JoinOutcome: Sendable {
      var joinError: String?
      var calls: Int
      var passes: UInt64
      var parked: Bool
      var stale: UInt64
    }

    static func joinAfterReuse(byAddingCommonMode: Bool) throws -> JoinOutcome {
      try onLoopThread { loop -> JoinOutcome in
        try loop.add(ManualSource(label: "keeps every mode alive") {}, to: .common)
        let eventFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        let calls = Counter()
        let old = DescriptorSource(fileDescriptor: eventFD, label: "old") { _, _ in
          _ = calls.increment()
        }
        try loop.add(old, to: .common)
        let writer = Self.reuseAsReadablePipe(eventFD)
        defer {
          old.invalidate()
          close(eventFD)
          close(writer)
        }
        var outcome = JoinOutcome(calls: 0, passes: 0, parked: false, stale: 0)
        do {
          if byAddingCommonMode {
            try loop.addCommonMode("tracking")
          } else {
            try loop.add(old, to: "tracking")
          }
        } catch {
          outcome.joinError = "\(error)"
        }
        let before = loop.metrics.passes
        loop.run(in: "tracking", for: .milliseconds(200))
        outcome.passes = loop.metrics.passes - before
        outcome.calls = calls.value
        outcome.parked = old.isParked
        outcome.stale = loop.metrics.staleDescriptors
        return outcome
      }
    }

    @Test(
      "96. A source whose eventfd was closed and its number reused by a pipe is refused when a mode joins the common set, and never spins",
      arguments: [true, false])
    func test_96_joiningAModeAfterReuseIsRefused(byAddingCommonMode: Bool) throws {
      let outcome = try Self.joinAfterReuse(byAddingCommonMode: byAddingCommonMode)
      #expect(outcome.calls == 0, "the old source is never called for the pipe")
      #expect(outcome.passes < 50, "a quiet run of 200 ms, not a spin: \(outcome.passes) passes")
      #expect(outcome.parked, "the old source polls nothing now")
      #expect(outcome.stale >= 1)
      let error = try #require(outcome.joinError)
      #expect(error.contains("no longer refers to the file the source was added with"), "\(error)")
      #expect(error.contains("fd "), "names the descriptor: \(error)")
    }

    @Test(
      "96. With a new source on the reused number, the mode joining the common set watches the new source, not the old"
    )
    func test_96_newSourceOnReusedNumberJoinsTheMode() throws {
      let (old, new, joinError) = try onLoopThread { loop -> (Int, [String], String?) in
        let eventFD = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        let oldCalls = Counter()
        let newCalls = Recorder()
        let old = DescriptorSource(fileDescriptor: eventFD, label: "old") { _, _ in
          _ = oldCalls.increment()
        }
        try loop.add(old, to: .common)
        let writer = Self.reuseAsReadablePipe(eventFD)
        let new = DescriptorSource(fileDescriptor: eventFD, label: "new") { _, events in
          newCalls.log("\(loop.currentMode?.name ?? "?") \(events)")
          drain(eventFD)
        }
        try loop.add(new, to: .common)
        defer {
          old.invalidate()
          new.invalidate()
          close(eventFD)
          close(writer)
        }
        var joinError: String?
        do { try loop.addCommonMode("tracking") } catch { joinError = "\(error)" }
        loop.run(in: "tracking", for: .seconds(5), returnAfterSourceHandled: true)
        return (oldCalls.value, newCalls.all, joinError)
      }
      #expect(old == 0)
      #expect(new == ["tracking [readable]"])
      #expect(joinError?.contains("no longer refers to the file") == true, "\(joinError ?? "")")
      #expect(joinError?.contains("EEXIST") == false, "the new source is not in the way")
    }

    @Test(
      "96. A source parked after a hang-up whose number was then reused is refused by setInterest, and never called for the new file"
    )
    func test_96_unparkingAfterReuseIsRefused() throws {
      let (calls, refusal, parked) = try onLoopThread { loop -> ([String], String?, Bool) in
        try loop.add(ManualSource {}, to: .default)
        let watched = makePipe()
        let log = Recorder()
        let source = DescriptorSource(fileDescriptor: watched.read, label: "watched") {
          _, events in log.log("\(events)")
        }
        try loop.add(source, to: .default)
        close(watched.write)  // a hang-up: reported once, then the source is parked
        loop.run(for: .seconds(5), returnAfterSourceHandled: true)
        let writer = Self.reuseAsReadablePipe(watched.read)
        defer {
          source.invalidate()
          close(watched.read)
          close(writer)
        }
        var refusal: String?
        do { try source.setInterest(.readable) } catch { refusal = "\(error)" }
        loop.run(for: .milliseconds(100))
        return (log.all, refusal, source.isParked)
      }
      #expect(calls == ["[hangUp]"], "the hang-up only, nothing for the pipe on its number")
      #expect(refusal?.contains("no longer refers to the file") == true, "\(refusal ?? "none")")
      #expect(parked)
    }

    @Test(
      "96. A newer source on a reused number whose old file came back to the number (dup2) is told invalidDescriptor, never called for the old file"
    )
    func test_96_oldFileBackOnTheNumberIsNotTheNewSources() throws {
      let (newEvents, oldCalls) = try onLoopThread { loop -> ([String], [String]) in
        try loop.add(ManualSource {}, to: .default)
        let number = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        let keptOpen = dup(number)  // the eventfd lives on after its number is closed
        let oldLog = Recorder()
        let newLog = Recorder()
        let old = DescriptorSource(fileDescriptor: number, label: "old") { _, events in
          oldLog.log("\(events)")
        }
        try loop.add(old, to: .default)
        // The number goes to a pipe, and a new source is made for that pipe.
        let writer = Self.reuseAsReadablePipe(number)
        drain(number)
        let new = DescriptorSource(fileDescriptor: number, label: "new") { _, events in
          newLog.log("\(events)")
        }
        try loop.add(new, to: .default)
        // The pipe goes, and the eventfd comes back to the number, readable.
        precondition(dup2(keptOpen, number) == number)
        var one: UInt64 = 1
        precondition(write(keptOpen, &one, 8) == 8)
        defer {
          old.invalidate()
          new.invalidate()
          close(number)
          close(keptOpen)
          close(writer)
        }
        loop.run(for: .milliseconds(200))
        return (newLog.all, oldLog.all)
      }
      #expect(!newEvents.contains { $0.contains("readable") }, "\(newEvents)")
      #expect(newEvents.count <= 1)
      #expect(oldCalls.count <= 1, "\(oldCalls)")
    }

    @Test(
      "96. A file back on its old number after its source went: a new source for it joins the mode (no EEXIST from the old registration), and a stale source the shedding finds is told invalidDescriptor"
    )
    func test_96_fileBackOnItsNumberJoinsAfterShedding() throws {
      let (newEvents, staleEvents) = try onLoopThread { loop -> ([String], [String]) in
        try loop.add(ManualSource {}, to: .default)
        let number = eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC))
        let keptOpen = dup(number)
        // The old source's registration outlives its number: closed first, then invalidated.
        let old = DescriptorSource(fileDescriptor: number, label: "old") { _, _ in }
        try loop.add(old, to: .default)
        close(number)
        old.invalidate()
        // Another source whose descriptor is closed behind its back (its file kept open).
        let other = makePipe()
        let otherCopy = dup(other.read)
        let staleLog = Recorder()
        let stale = DescriptorSource(fileDescriptor: other.read, label: "stale") { _, events in
          staleLog.log("\(events)")
        }
        try loop.add(stale, to: .default)
        close(other.read)
        // The eventfd comes back to its number; a new source is made for it.
        precondition(dup2(keptOpen, number) == number)
        let newLog = Recorder()
        let new = DescriptorSource(fileDescriptor: number, label: "new") { _, events in
          newLog.log("\(events)")
          var value: UInt64 = 0
          _ = read(number, &value, 8)
        }
        try loop.add(new, to: .default)
        var one: UInt64 = 1
        precondition(write(keptOpen, &one, 8) == 8)
        loop.run(for: .milliseconds(200))
        new.invalidate()
        stale.invalidate()
        for fd in [number, keptOpen, otherCopy, other.write] { close(fd) }
        return (newLog.all, staleLog.all)
      }
      #expect(newEvents == ["[readable]"])
      #expect(staleEvents == ["[error, invalidDescriptor]"], "reported once by the next pass")
    }

    @Test(
      "96. Two sources on one descriptor share its witness: invalidating one leaves the other watching"
    )
    func test_96_twoSourcesOnOneDescriptor() throws {
      let (first, second) = try onLoopThread { loop -> (Int, [String]) in
        let pipe = makePipe()
        defer {
          close(pipe.read)
          close(pipe.write)
        }
        let firstCalls = Counter()
        let secondCalls = Recorder()
        let first = DescriptorSource(fileDescriptor: pipe.read) { _, _ in
          _ = firstCalls.increment()
        }
        let second = DescriptorSource(fileDescriptor: pipe.read) { _, events in
          secondCalls.log("\(events)")
          drain(pipe.read)
        }
        try loop.add(first, to: .default)
        try loop.add(second, to: "other")
        first.invalidate()
        // Joining a third mode asks the witness the two shared: still this pipe.
        try loop.add(second, to: "third")
        writeByte(pipe.write)
        loop.run(in: "third", for: .seconds(5), returnAfterSourceHandled: true)
        second.invalidate()
        return (firstCalls.value, secondCalls.all)
      }
      #expect(first == 0)
      #expect(second == ["[readable]"])
    }

    @Test(
      "96. Closing each descriptor before invalidating its source, the common order, 2 000 times: every new source on the reused number is called, and the witness set is rebuilt only now and then"
    )
    func test_96_closeThenInvalidateIsAmortised() throws {
      let (calls, rebuilds) = try onLoopThread { loop -> (Int, Int) in
        try loop.add(ManualSource {}, to: .default)
        let calls = Counter()
        for _ in 0..<2_000 {
          let pipe = makePipe()
          let source = DescriptorSource(fileDescriptor: pipe.read) { _, _ in
            drain(pipe.read)
            _ = calls.increment()
          }
          try loop.add(source, to: .default)
          writeByte(pipe.write)
          loop.run(for: .seconds(5), returnAfterSourceHandled: true)
          close(pipe.read)
          close(pipe.write)
          source.invalidate()
        }
        return (calls.value, loop.lock.withLock { loop.witnesses!.rebuilds })
      }
      #expect(calls == 2_000)
      #expect(rebuilds < 100, "\(rebuilds) rebuilds of the witness set for 2 000 sources")
    }

    @Test(
      "96. The witness set is one of the loop's own descriptors: watching it is refused, and teardown closes it"
    )
    func test_96_witnessSetIsTheLoopsOwn() throws {
      let (refusal, witnessFD) = try onLoopThread { loop -> (String?, Int32) in
        let pipe = makePipe()
        defer {
          close(pipe.read)
          close(pipe.write)
        }
        let source = DescriptorSource(fileDescriptor: pipe.read) { _, _ in }
        try loop.add(source, to: .default)
        let witnessFD = loop.lock.withLock { loop.witnesses!.set.fd }
        var refusal: String?
        do {
          try loop.add(DescriptorSource(fileDescriptor: witnessFD) { _, _ in }, to: .default)
        } catch {
          refusal = "\(error)"
        }
        source.invalidate()
        return (refusal, witnessFD)
      }
      #expect(refusal?.contains("witnesses") == true, "\(refusal ?? "none")")
      #expect(!isOpen(witnessFD), "closed when the thread exited")
    }
  }
}
