import CRunLoopShims
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// Issue 28, defects 2 and 6 (checklist line 91): a watched descriptor closed behind its
/// source's back, its number then reused by anything, never crashes the process, and an event
/// for a source removed in the same pass is simply stale — it does not rebuild the epoll set.
extension RunLoopKitTests {
  @Suite("Descriptors closed and reused behind a source's back") struct ReusedDescriptors {
    /// What a closed descriptor's number can come to name.
    enum Reuse: String, CaseIterable, CustomTestStringConvertible, Sendable {
      /// epoll_ctl(DEL) answers EPERM: a regular file cannot be polled at all.
      case regularFile
      /// ENOENT: a pollable file that was never added.
      case socket
      /// ENOENT: another epoll instance.
      case epollInstance
      /// EINVAL: the loop's own epoll set (a copy of its descriptor).
      case loopsOwnEpollSet

      var testDescription: String { rawValue }

      /// Makes `fd` name a file of this kind (closing what it named, the last reference to
      /// it, so the kernel drops the registration with it).
      func take(_ fd: Int32, loop: Loop) {
        let replacement: Int32
        var ownCopy = false
        switch self {
        case .regularFile: replacement = makeRegularFile()
        case .socket:
          var pair: [Int32] = [0, 0]
          precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
          close(pair[1])
          replacement = pair[0]
        case .epollInstance: replacement = crl_epoll_create()
        case .loopsOwnEpollSet:
          replacement = loop.lock.withLock { loop.modeStates[.default]!.epoll.fd }
          ownCopy = true
        }
        precondition(dup2(replacement, fd) == fd)
        if !ownCopy { close(replacement) }
      }
    }

    /// The ways the loop unregisters a source by its fd number.
    enum Path: String, CaseIterable, CustomTestStringConvertible, Sendable {
      case remove, invalidate, teardown, parking
      var testDescription: String { rawValue }
    }

    @Test(
      "91. A source whose fd was closed and its number reused: removing, invalidating, parking or tearing down never crashes",
      arguments: Reuse.allCases, Path.allCases)
    func test_91_reusedNumberNeverCrashes(reuse: Reuse, path: Path) throws {
      let calls = Recorder()
      let after = Box<[String]>([])
      let reused = Box<Int32>(-1)
      try onLoopThread { loop in
        try loop.add(ManualSource {}, to: .default)  // keeps the mode, and the loop, alive
        let watched = makePipe()
        let other = makePipe()
        var toClose = [watched.write, other.read, other.write]
        defer { for fd in toClose { close(fd) } }
        reused.value = watched.read
        let source = DescriptorSource(fileDescriptor: watched.read, label: "watched", order: 1) {
          _, events in calls.log("watched \(events)")
        }
        try loop.add(source, to: .default)
        switch path {
        case .remove, .invalidate, .teardown:
          reuse.take(watched.read, loop: loop)
          if path == .remove { loop.remove(source, from: .default) }
          if path == .invalidate { source.invalidate() }
        case .parking:
          // Both ready in one wait: the earlier handler reuses the number, then the watched
          // source's hang-up parks it, which unregisters it by that number.
          close(watched.write)
          toClose.removeFirst()
          writeByte(other.write)
          let first = DescriptorSource(fileDescriptor: other.read, label: "first", order: 0) {
            _, _ in
            drain(other.read)
            reuse.take(watched.read, loop: loop)
          }
          try loop.add(first, to: .default)
          loop.run(for: .zero)
          first.invalidate()
        }
        // The loop goes on working.
        let ran = Box(false)
        try loop.perform { ran.value = true }
        loop.run(for: .zero)
        after.value = [
          "block ran: \(ran.value)", "contains: \(loop.contains(source, in: .default))",
        ]
        if path != .teardown { source.invalidate() }
      }  // the thread exits: teardown unregisters whatever is left
      close(reused.value)
      let expectedCalls = path == .parking ? ["watched [hangUp]"] : []
      #expect(calls.all == expectedCalls)
      #expect(after.value.first == "block ran: true")
      #expect(after.value.last == "contains: \(path == .teardown || path == .parking)")
    }

    @Test(
      "91. A parked source whose fd number now names one of the loop's own descriptors cannot be watched again"
    )
    func test_91_unparkingOntoTheLoopsOwnDescriptorThrows() throws {
      // The loop must hand the closed number to its own new epoll set, which takes the lowest
      // free number; another thread may take it first, so a few attempts are allowed.
      var checked = false
      for _ in 0..<5 where !checked {
        checked = try onLoopThread { loop -> Bool in
          try loop.add(ManualSource {}, to: .default)
          let watched = makePipe()
          let source = DescriptorSource(fileDescriptor: watched.read) { _, _ in }
          try loop.add(source, to: .default)
          close(watched.write)
          loop.run(for: .zero)  // the hang-up parks it
          close(watched.read)
          try loop.add(ManualSource {}, to: "fresh")  // a new mode: a new epoll set
          defer { source.invalidate() }
          guard loop.ownedDescriptors.contains(watched.read) else { return false }
          #expect(throws: LoopError.self) { try source.setInterest(.readable) }
          #expect(loop.ownedDescriptors.contains(watched.read))
          return true
        }
      }
      #expect(checked, "the loop never reused the closed number for itself in five tries")
    }

    @Test(
      "91. A parked source whose registration could not be removed by its number stays refused after a rebuild"
    )
    func test_91_lostParkedRegistrationStaysRefused() throws {
      let (refusedBefore, refusedAfter) = try onLoopThread { loop -> (Bool, Bool) in
        try loop.add(ManualSource {}, to: .default)
        let watched = makePipe()
        let other = makePipe()
        let replacement = Box<(read: Int32, write: Int32)?>(nil)
        let source = DescriptorSource(fileDescriptor: watched.read, order: 1) { _, _ in }
        try loop.add(source, to: .default)
        // One pass: the first handler puts a new pipe at the watched number, then the watched
        // source's hang-up parks it, and the removal by number finds the new pipe instead.
        close(watched.write)
        writeByte(other.write)
        let first = DescriptorSource(fileDescriptor: other.read, order: 0) { _, _ in
          drain(other.read)
          let fresh = makePipe()
          dup2(fresh.read, watched.read)
          close(fresh.read)
          replacement.value = (watched.read, fresh.write)
        }
        try loop.add(first, to: .default)
        loop.run(for: .zero)
        first.invalidate()
        let before = (try? source.setInterest(.readable)) == nil
        _ = loop.lock.withLock { loop.rebuildEpollSetLocked(loop.modeStates[.default]!) }
        let after = (try? source.setInterest(.readable)) == nil
        source.invalidate()
        for fd in [other.read, other.write, replacement.value?.read, replacement.value?.write] {
          if let fd { close(fd) }
        }
        return (before, after)
      }
      #expect(refusedBefore)
      #expect(refusedAfter, "a rebuild forgot that the parked registration lost its file")
    }

    @Test(
      "Defect 6: an event for a source an earlier handler of the same pass invalidated (closing its fd first or not) is stale, and rebuilds nothing",
      arguments: [false, true])
    func eventOfSourceRemovedThisPassIsStale(closesFirst: Bool) throws {
      let (fired, handled, rebuilds, stale) = try onLoopThread { loop in
        let pipe = makePipe()
        defer {
          if !closesFirst { close(pipe.read) }
          close(pipe.write)
        }
        do {
          writeByte(pipe.write)
          let handled = Box(0)
          let source = DescriptorSource(fileDescriptor: pipe.read) { _, _ in handled.value += 1 }
          try loop.add(source, to: .default)
          let fired = Box(0)
          // Due at once: the same poll returns its timerfd and the readable pipe, and timers
          // are handled first (libcurl's timeout callback does this on every timeout). Closing
          // the fd first, the common order, leaves a registration the loop cannot remove by
          // number; the kernel dropped it with the file, and the next wait would say if not.
          let timer = try LoopTimer(after: .zero) { _ in
            fired.value += 1
            if closesFirst { close(pipe.read) }
            source.invalidate()
          }
          try loop.add(timer, to: .default)
          try loop.add(ManualSource {}, to: .default)
          loop.run(for: .zero)
          loop.run(for: .milliseconds(20))  // the registration is gone: nothing reports it
          let metrics = loop.metrics
          return (fired.value, handled.value, metrics.epollRebuilds, metrics.staleDescriptors)
        }
      }
      #expect(fired == 1)
      #expect(handled == 0)
      #expect(
        rebuilds == 0,
        "a removed source's event was taken for a descriptor closed behind the loop's back")
      #expect(stale == 0)
    }

    @Test(
      "Registrations that could not be removed by number are shed by one rebuild once they outnumber the live ones"
    )
    func untrackedRegistrationsAreShed() throws {
      let (pending, rebuilds, live) = try onLoopThread { loop in
        try loop.add(ManualSource {}, to: .default)
        let keep = makePipe()
        let liveCalls = Box(0)
        let liveSource = DescriptorSource(fileDescriptor: keep.read) { _, _ in
          liveCalls.value += 1
          drain(keep.read)
          Loop.current.stop()
        }
        try loop.add(liveSource, to: .default)
        // Closed before their sources are invalidated, the common order: each removal by
        // number then fails, and the loop cannot tell whether the kernel still holds it.
        for _ in 0..<70 {
          let pipe = makePipe()
          let source = DescriptorSource(fileDescriptor: pipe.read) { _, _ in }
          try loop.add(source, to: .default)
          close(pipe.read)
          close(pipe.write)
          source.invalidate()
        }
        loop.run(for: .zero)
        writeByte(keep.write)
        loop.run(for: .seconds(5))
        liveSource.invalidate()
        close(keep.read)
        close(keep.write)
        let pending = loop.lock.withLock { loop.modeStates[.default]!.untrackedTokens.count }
        return (pending, loop.metrics.epollRebuilds, liveCalls.value)
      }
      #expect(pending == 0)
      #expect(rebuilds == 1)
      #expect(live == 1, "the live source stopped working after the rebuild")
    }
  }
}

/// An open, unlinked regular file: a descriptor epoll refuses (EPERM).
func makeRegularFile() -> Int32 {
  var template = Array("/tmp/runloopkit-XXXXXX".utf8CString)
  let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
  precondition(fd >= 0, "mkstemp failed")
  template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
  return fd
}
