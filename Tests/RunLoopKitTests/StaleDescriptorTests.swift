import CRunLoopShims
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// Issue 10, defect 4: a descriptor source whose fd was closed behind the loop's back (while a
/// `dup` keeps the file open, so the kernel keeps the registration) must not make the loop
/// spin, and the loop's own descriptors cannot be added as sources.
extension RunLoopKitTests {
  @Suite("Stale and foreign descriptors") struct StaleDescriptors {
    static let runLength = Duration.milliseconds(200)
    /// Passes a loop that does not spin makes in one run (two), plus one to spare.
    static let passLimit = 3

    /// What a source's handler saw, how many passes the loop made and how much CPU its thread
    /// used, over a `runLength` run in which `prepare` (called once the source is registered)
    /// makes its fd stale.
    ///
    /// A loop that does not spin makes a fixed number of passes whatever the run's length (two:
    /// the one that reports the stale source, and the one that then sleeps until the
    /// deadline), so the run need not be long: a loop that spins, or that the stale
    /// registration keeps waking, makes more passes however short the run.
    static func watchStale(
      prepare: @escaping @Sendable (_ watched: Int32, _ writeEnd: Int32) -> Void
    ) throws -> (calls: [DescriptorSource.Events], cpu: Duration, passes: Int) {
      let pipe = makePipe()
      let keepOpen = dup(pipe.read)
      defer {
        close(keepOpen)
        close(pipe.write)
      }
      let calls = Box<[DescriptorSource.Events]>([])
      let passes = Box(0)
      let cpu = try onLoopThread { loop -> Duration in
        let source = DescriptorSource(fileDescriptor: pipe.read) { _, events in
          calls.value.append(events)
          var byte: UInt8 = 0
          _ = read(pipe.read, &byte, 1)  // EBADF, or reads some other file: no progress
        }
        try loop.add(source, to: .default)
        try loop.add(ManualSource {}, to: .default)
        try loop.add(
          LoopObserver(activities: .beforeSources) { _, _ in passes.value += 1 }, to: .default)
        prepare(pipe.read, pipe.write)
        let before = threadCPUTime()
        loop.run(for: runLength)
        let used = before.duration(to: threadCPUTime())
        source.invalidate()
        return used
      }
      return (calls.value, cpu, passes.value)
    }

    @Test(
      "68. A descriptor source whose fd was closed (a dup keeps the file open) is called at most once more and never makes the loop spin"
    )
    func test_68_closedDescriptorDoesNotSpin() throws {
      let seen = try Self.watchStale { watched, writeEnd in
        close(watched)
        writeByte(writeEnd)
      }
      #expect(
        seen.calls == [[.error, .invalidDescriptor]], "handler saw \(seen.calls.count) calls")
      #expect(seen.passes <= Self.passLimit, "\(seen.passes) passes in \(Self.runLength)")
      #expect(
        seen.cpu < .milliseconds(50), "loop thread used \(seen.cpu) of CPU in \(Self.runLength)")
    }

    @Test("68. A closed fd whose number now names another file is not read as the old one")
    func test_68_closedAndReusedDescriptorDoesNotSpin() throws {
      let other = Box<[Int32]>([])
      let seen = try Self.watchStale { watched, writeEnd in
        close(watched)
        let reused = makePipe()
        writeByte(reused.write)
        if reused.read != watched {  // make the number name the other pipe, which has data
          dup2(reused.read, watched)
          close(reused.read)
        }
        other.value = [watched, reused.write]
        writeByte(writeEnd)
      }
      for fd in other.value { close(fd) }
      #expect(
        seen.calls == [[.error, .invalidDescriptor]], "handler saw \(seen.calls.count) calls")
      #expect(seen.passes <= Self.passLimit, "\(seen.passes) passes in \(Self.runLength)")
      #expect(
        seen.cpu < .milliseconds(50), "loop thread used \(seen.cpu) of CPU in \(Self.runLength)")
    }

    @Test("68. The stale source is reported once, and a new source on the reused number works")
    func test_68_newSourceOnReusedNumber() throws {
      let pipe = makePipe()
      let keepOpen = dup(pipe.read)
      let recorder = Recorder()
      try onLoopThread { loop in
        let old = DescriptorSource(fileDescriptor: pipe.read, label: "old") { _, events in
          recorder.log("old \(events)")
        }
        try loop.add(old, to: .default)
        close(pipe.read)
        let fresh = makePipe()
        if fresh.read != pipe.read {  // make the old number name the new pipe
          dup2(fresh.read, pipe.read)
          close(fresh.read)
        }
        let new = DescriptorSource(fileDescriptor: pipe.read, label: "new") { _, _ in
          recorder.log("new")
          drain(pipe.read)
        }
        try loop.add(new, to: .default)
        writeByte(pipe.write)  // the old file, still open through `keepOpen`
        writeByte(fresh.write)
        loop.run(for: .milliseconds(300))
        #expect(loop.debugDescription.contains("no longer refers to the file it was added with"))
        #expect(throws: LoopError.self) { try old.setInterest(.readable) }
        old.invalidate()
        new.invalidate()
        close(pipe.read)
        close(fresh.write)
      }
      close(keepOpen)
      close(pipe.write)
      #expect(recorder.count(of: "new") >= 1)
      #expect(recorder.all.filter { $0.hasPrefix("old") } == ["old [error, invalidDescriptor]"])
    }

    @Test("68. Stale sources are reported even when the run returns after one source")
    func test_68_staleReportedWithReturnAfterSourceHandled() throws {
      let recorder = Recorder()
      let pipes = [makePipe(), makePipe(), makePipe()]
      let spares = pipes.map { dup($0.read) }
      let results = try onLoopThread { loop -> [Loop.RunResult] in
        let healthy = DescriptorSource(fileDescriptor: pipes[0].read, order: -1) { _, _ in
          recorder.log("healthy")
        }
        try loop.add(healthy, to: .default)
        var stale: [DescriptorSource] = []
        for (index, pipe) in pipes.enumerated().dropFirst() {
          let source = DescriptorSource(fileDescriptor: pipe.read, order: index) { _, events in
            recorder.log("stale \(index) \(events)")
          }
          try loop.add(source, to: .default)
          stale.append(source)
        }
        for pipe in pipes { writeByte(pipe.write) }
        // Both stale sources' fds close in the same batch; one run that stops after a source.
        close(pipes[1].read)
        close(pipes[2].read)
        var results: [Loop.RunResult] = []
        for _ in 0..<3 {
          results.append(loop.run(for: .milliseconds(100), returnAfterSourceHandled: true))
        }
        #expect(loop.metrics.staleDescriptors == 2)
        healthy.invalidate()
        for source in stale { source.invalidate() }
        return results
      }
      for fd in spares { close(fd) }
      close(pipes[0].read)
      for pipe in pipes { close(pipe.write) }
      #expect(results == [.handledSource, .handledSource, .handledSource])
      #expect(recorder.count(of: "stale 1 [error, invalidDescriptor]") == 1)
      #expect(recorder.count(of: "stale 2 [error, invalidDescriptor]") == 1)
      #expect(recorder.all.filter { $0.hasPrefix("stale") }.count == 2)
      #expect(recorder.count(of: "healthy") == 3)
    }

    @Test(
      "69. Adding a source on an fd the loop itself owns (epoll set, timerfd, wake-up eventfd) throws naming the fd"
    )
    func test_69_loopOwnDescriptorsAreRefused() throws {
      try onLoopThread { loop in
        try loop.add(ManualSource {}, to: .default)
        try loop.add(ManualSource {}, to: "other")
        let owned = loop.ownedDescriptors
        #expect(owned.count == 5)  // wake-up eventfd + 2 modes × (epoll set + timerfd)
        for fd in owned {
          for mode: Loop.Mode in [.default, "other", "third"] {
            let source = DescriptorSource(fileDescriptor: fd) { _, _ in }
            do {
              try loop.add(source, to: mode)
              Issue.record("fd \(fd), owned by the loop, was accepted in \(mode)")
            } catch let error as LoopError {
              #expect(error.description.contains("fd \(fd)"))
              #expect(error.description.contains("belongs to the loop"))
            } catch {
              Issue.record("unexpected error \(error)")
            }
            #expect(!loop.contains(source, in: mode))
          }
        }
      }
    }
  }
}

/// CPU time the calling thread has used.
func threadCPUTime() -> LoopClock.Instant {
  var now = timespec()
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
  return LoopClock.Instant(nanoseconds: Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec))
}
