import CRunLoopShims
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// Issue 25: deliveries ask the kernel nothing on the way to the handler, so a descriptor
/// closed *after* its source was delivered is noticed by the check the loop makes after the
/// call, before its next wait. Line 68 still holds: at most one more call, and no spin.
extension RunLoopKitTests.StaleDescriptors {
  /// What the handler saw after `close` ran, how many passes the loop made from then on, the
  /// CPU its thread used over the run and the loop's stale count. The source is delivered
  /// once first (its fd healthy); a timer then calls `close` on the loop's thread while the
  /// loop sleeps, the source confirmed after that call.
  static func closeAfterDelivery(
    _ close: @escaping @Sendable (_ watched: Int32, _ writeEnd: Int32) -> Void
  ) throws -> (afterClose: [DescriptorSource.Events], passes: Int, cpu: Duration, stale: Int) {
    let pipe = DupedPipe()
    defer { pipe.closeKept() }
    let closed = Box(false)
    let afterClose = Box<[DescriptorSource.Events]>([])
    let passes = Box(0)
    let (cpu, stale) = try onLoopThread { loop -> (Duration, Int) in
      let source = DescriptorSource(fileDescriptor: pipe.read) { _, events in
        if closed.value { afterClose.value.append(events) }
        var byte: UInt8 = 0
        _ = read(pipe.read, &byte, 1)  // after the close: EBADF, or reads another file
      }
      try loop.add(source, to: .default)
      try loop.add(
        LoopObserver(activities: .beforeSources) { _, _ in
          if closed.value { passes.value += 1 }
        }, to: .default)
      try loop.add(
        LoopTimer(after: .milliseconds(20)) { _ in
          close(pipe.read, pipe.write)
          closed.value = true
        }, to: .default)
      writeByte(pipe.write)  // the healthy delivery, in the run's first pass
      let before = threadCPUTime()
      loop.run(for: runLength)
      let used = before.duration(to: threadCPUTime())
      source.invalidate()
      return (used, Int(loop.metrics.staleDescriptors))
    }
    return (afterClose.value, passes.value, cpu, stale)
  }

  @Test(
    "68. A descriptor closed after its source was delivered (a dup keeps the file open) gets at most one more call, is then parked as stale, and never makes the loop spin"
  )
  func test_68_closedAfterDeliveryDoesNotSpin() throws {
    let seen = try Self.closeAfterDelivery { watched, writeEnd in
      Glibc.close(watched)
      writeByte(writeEnd)  // the old file, still open through the dup, becomes readable
    }
    #expect(seen.afterClose.count <= 1, "handler saw \(seen.afterClose) after the close")
    #expect(seen.stale == 1)
    // The pass that made the one call, the one whose rebuild sheds it, the sleep to the end.
    #expect(seen.passes <= 4, "\(seen.passes) passes after the close in \(Self.runLength)")
    #expect(seen.cpu < .milliseconds(50), "loop thread used \(seen.cpu) of CPU")
  }

  @Test(
    "68. Closed after a delivery and its number reused for a readable file: at most one more call, then parked, no spin"
  )
  func test_68_closedAndReusedAfterDeliveryDoesNotSpin() throws {
    let other = Box<[Int32]>([])
    let seen = try Self.closeAfterDelivery { watched, writeEnd in
      Glibc.close(watched)
      let reused = makePipe()
      writeByte(reused.write)
      if reused.read != watched {  // make the number name the other pipe, which has data
        dup2(reused.read, watched)
        Glibc.close(reused.read)
      }
      other.value = [watched, reused.write]
      writeByte(writeEnd)
    }
    for fd in other.value { close(fd) }
    #expect(seen.afterClose.count <= 1, "handler saw \(seen.afterClose) after the close")
    #expect(seen.stale == 1)
    #expect(seen.passes <= 4, "\(seen.passes) passes after the close in \(Self.runLength)")
    #expect(seen.cpu < .milliseconds(50), "loop thread used \(seen.cpu) of CPU")
  }

  @Test(
    "68. A healthy source its handler leaves readable is delivered on every pass and never taken for stale"
  )
  func test_68_unconsumedHealthySourceIsNotStale() throws {
    let pipe = makePipe()
    defer {
      close(pipe.read)
      close(pipe.write)
    }
    for _ in 0..<3 { writeByte(pipe.write) }
    let calls = Box(0)
    let stale = try onLoopThread { loop -> UInt64 in
      // Reads one byte a call: the fd stays readable, so each wait reports it again.
      let source = DescriptorSource(fileDescriptor: pipe.read) { _, events in
        #expect(events == .readable)
        calls.value += 1
        var byte: UInt8 = 0
        _ = read(pipe.read, &byte, 1)
      }
      try loop.add(source, to: .default)
      for _ in 0..<3 {
        #expect(loop.run(for: .seconds(2), returnAfterSourceHandled: true) == .handledSource)
      }
      #expect(loop.run(for: .milliseconds(20)) == .timedOut)
      #expect(source.isValid)
      try source.setInterest(.readable)  // refused for a source found stale
      source.invalidate()
      return loop.metrics.staleDescriptors
    }
    #expect(calls.value == 3)
    #expect(stale == 0)
  }

  @Test(
    "68. A stale source whose pass returns before the descriptor phase is still checked before the next wait, not called again"
  )
  func test_68_skippedLookIsLookedAgain() throws {
    let pipe = DupedPipe()
    defer { pipe.closeKept() }
    let calls = Box(0)
    let stale = try onLoopThread { loop -> UInt64 in
      let manual = ManualSource {}
      // Its first call closes its fd (the dup keeps the file, which stays readable) and
      // signals a manual source, so the next run returns after that source without handing
      // out the look's events.
      let source = DescriptorSource(fileDescriptor: pipe.read) { _, _ in
        calls.value += 1
        if calls.value == 1 {
          drain(pipe.read)
          close(pipe.read)
          writeByte(pipe.write)
        }
        manual.signal()
      }
      try loop.add(source, to: .default)
      try loop.add(manual, to: .default)
      writeByte(pipe.write)
      for _ in 0..<10 { _ = loop.run(for: .milliseconds(20), returnAfterSourceHandled: true) }
      source.invalidate()
      manual.invalidate()
      return loop.metrics.staleDescriptors
    }
    #expect(calls.value == 1, "\(calls.value) calls; only the first was before the close")
    #expect(stale == 1)
  }

  @Test(
    "68. A source whose handler drains its fd is delivered again and again, after sleeps, with one kernel check on the way to a handler in all (the first report after the add)"
  )
  func test_68_healthyDeliveriesAskTheKernelOnce() throws {
    let pipe = makePipe()
    defer {
      close(pipe.read)
      close(pipe.write)
    }
    let calls = Counter()
    let thread = try ResidentThread(name: "checks")
    let source = DescriptorSource(fileDescriptor: pipe.read) { _, _ in
      drain(pipe.read)
      _ = calls.increment()
    }
    try thread.loop.add(source, to: .default)
    for round in 1...20 {
      #expect(waitUntil { thread.loop.isWaiting })
      writeByte(pipe.write)
      #expect(waitUntil { calls.value == round })
    }
    #expect(waitUntil { thread.loop.isWaiting })
    let (onTheWay, all) = thread.loop.lock.withLock {
      (thread.loop.deliveryChecks, thread.loop.registrationChecks)
    }
    source.invalidate()
    thread.stop()
    try thread.join()
    #expect(calls.value == 20)
    #expect(onTheWay == 1)
    // The others are made before each wait, off that path: one per call.
    #expect(all == 21)
  }

  @Test(
    "68. A descriptor closed while a dup keeps its file, whose readiness someone else drains through the dup, gets at most one more call"
  )
  func test_68_drainedThroughADup() throws {
    let pipe = DupedPipe()
    defer { pipe.closeKept() }
    let calls = Counter()
    let thread = try ResidentThread(name: "dup-drain")
    // The handler drains the file through the dup, as another reader of it would.
    let source = DescriptorSource(fileDescriptor: pipe.read) { _, _ in
      drain(pipe.kept)
      _ = calls.increment()
    }
    try thread.loop.add(source, to: .default)
    #expect(waitUntil { thread.loop.isWaiting })
    writeByte(pipe.write)
    #expect(waitUntil { calls.value == 1 })
    close(pipe.read)  // behind the source's back
    for _ in 0..<5 {
      #expect(waitUntil { thread.loop.isWaiting })
      writeByte(pipe.write)
      // Delivered (and drained through the dup), or left unread once the source is parked.
      #expect(
        waitUntil {
          thread.loop.isWaiting
            && (unreadBytes(pipe.kept) == 0 || thread.loop.metrics.staleDescriptors > 0)
        })
    }
    let stale = thread.loop.metrics.staleDescriptors
    source.invalidate()
    thread.stop()
    try thread.join()
    #expect(calls.value - 1 <= 1, "\(calls.value - 1) calls after the close")
    #expect(stale == 1)
  }

  @Test(
    "68. A confirmed source closed behind its back, reported in a pass whose rebuild finds it stale, gets one call, not a report and a call"
  )
  func test_68_rebuildInTheSamePassCallsOnce() throws {
    let watched = makePipe()
    let other = makePipe()
    let keepWatched = dup(watched.read)
    let keepOther = dup(other.read)
    defer {
      for fd in [keepWatched, keepOther, watched.write, other.write] { close(fd) }
    }
    let afterClose = Box<[DescriptorSource.Events]>([])
    let closed = Box(false)
    try onLoopThread { loop in
      let source = DescriptorSource(fileDescriptor: watched.read) { _, events in
        if closed.value { afterClose.value.append(events) }
        drain(watched.read)  // fails once the fd is closed
      }
      let doomed = DescriptorSource(fileDescriptor: other.read) { _, _ in }
      try loop.add(source, to: .default)
      try loop.add(doomed, to: .default)
      writeByte(watched.write)
      loop.run(for: .milliseconds(30))  // one call; the check before the next wait confirms it
      try loop.add(
        LoopTimer(after: .milliseconds(10)) { _ in
          close(watched.read)
          close(other.read)
          // Its number closed, its registration cannot be removed: the next report of its
          // file (kept by the dup) makes the pass rebuild the set.
          doomed.invalidate()
          closed.value = true
          writeByte(watched.write)
          writeByte(other.write)
        }, to: .default)
      loop.run(for: .milliseconds(60))
      source.invalidate()
    }
    #expect(afterClose.value.count == 1, "after the close: \(afterClose.value)")
  }

  @Test(
    "68. A source in two modes closed behind its back gets one more call in all, not one per mode"
  )
  func test_68_oneCallAcrossModes() throws {
    let pipe = DupedPipe()
    defer { pipe.closeKept() }
    let calls = Box(0)
    let closed = Box(false)
    let stale = try onLoopThread { loop -> UInt64 in
      let source = DescriptorSource(fileDescriptor: pipe.read) { _, _ in
        if closed.value { calls.value += 1 }
        drain(pipe.read)  // fails once the fd is closed
      }
      try loop.add(source, to: .default)
      try loop.add(source, to: "tracking")
      writeByte(pipe.write)
      loop.run(for: .milliseconds(30))
      writeByte(pipe.write)
      loop.run(in: "tracking", for: .milliseconds(30))  // confirmed in both modes now
      close(pipe.read)  // behind its back; the dup keeps the file, which becomes readable
      closed.value = true
      writeByte(pipe.write)
      loop.run(for: .milliseconds(30))
      loop.run(in: "tracking", for: .milliseconds(30))
      source.invalidate()
      return loop.metrics.staleDescriptors
    }
    #expect(calls.value <= 1, "\(calls.value) calls after the close")
    #expect(stale >= 1)
  }
}

/// A pipe whose read end has a `dup`, as a child process would hold it: closing the read end
/// leaves the file open, and the kernel goes on reporting it.
struct DupedPipe {
  let read: Int32
  let write: Int32
  let kept: Int32

  init() {
    let pipe = makePipe()
    (read, write, kept) = (pipe.read, pipe.write, dup(pipe.read))
  }

  /// Closes the dup and the write end (the read end is the test's to close).
  func closeKept() {
    close(kept)
    close(write)
  }
}

/// Bytes waiting to be read from `fd` (FIONREAD).
func unreadBytes(_ fd: Int32) -> Int32 {
  var count: Int32 = 0
  _ = ioctl(fd, UInt(FIONREAD), &count)
  return count
}
