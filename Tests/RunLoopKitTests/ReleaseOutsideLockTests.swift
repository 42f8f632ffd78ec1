import Dispatch
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// Issue 10, defect 1: no user object is released while a loop's lock is held, so a `deinit`
/// that calls back into the loop (GLib's `/maincontext/source_finalization_from_source`) can
/// never deadlock the thread that owns it.
extension RunLoopKitTests {
  @Suite("Objects are released outside the loop's lock") struct ReleaseOutsideLock {
    /// Invalidates another source when it goes away: the call takes the loop's lock.
    final class InvalidatesOnDeinit: Sendable {
      let other: ManualSource
      init(_ other: ManualSource) { self.other = other }
      deinit { other.invalidate() }
    }

    /// Queues a block when it goes away: `perform` takes the loop's lock too.
    final class PerformsOnDeinit: Sendable {
      let loop: Loop
      init(_ loop: Loop) { self.loop = loop }
      deinit { try? loop.perform {} }
    }

    /// Adds the two sources of the reproduction to `loop`; the loop holds the only reference
    /// to `first`, whose closure holds the only reference to the object that invalidates `second`.
    static func addReproduction(to loop: Loop, mode: Loop.Mode = .default) throws {
      let second = ManualSource {}
      let holder = InvalidatesOnDeinit(second)
      let first = ManualSource { withExtendedLifetime(holder) {} }
      try loop.add(first, to: mode)
      try loop.add(second, to: mode)
    }

    @Test("A plain thread whose loop holds a source that invalidates another on release exits")
    func plainThreadExits() {
      let thread = TestThread {
        try? ReleaseOutsideLock.addReproduction(to: Loop.current)
      }
      #expect(completesWithin(seconds: 5) { thread.join() }, "the exiting thread deadlocked")
    }

    @Test("Items of a mode that is not common, and of .common, are released after the lock")
    func everyModeIsReleasedOutsideTheLock() {
      let thread = TestThread {
        let loop = Loop.current
        try? ReleaseOutsideLock.addReproduction(to: loop, mode: "tracking")
        try? ReleaseOutsideLock.addReproduction(to: loop, mode: .common)
        let callsBack = PerformsOnDeinit(loop)
        try? loop.add(
          LoopTimer(after: .seconds(3600)) { _ in withExtendedLifetime(callsBack) {} },
          to: "other")
        try? loop.add(
          LoopObserver(activities: .entry) { _, _ in withExtendedLifetime(callsBack) {} },
          to: "other")
      }
      #expect(completesWithin(seconds: 5) { thread.join() }, "the exiting thread deadlocked")
    }

    @Test("A resident thread with the same items stops and joins within 5 s")
    func residentThreadJoins() throws {
      let thread = try ResidentThread(name: "finalize")
      try thread.performAndWait { try ReleaseOutsideLock.addReproduction(to: thread.loop) }
      thread.stop()
      #expect(completesWithin(seconds: 5) { try? thread.join() }, "join() never returned")
    }

    @Test("Invalidating an item whose closure holds the last reference to such an object")
    func invalidateReleases() {
      let otherValid = Box<Bool?>(nil)
      let thread = TestThread {
        let loop = Loop.current
        let other = ManualSource {}
        try? loop.add(other, to: .default)
        // The source's closure holds the only references to both objects.
        let source = ManualSource {
          [holder = InvalidatesOnDeinit(other), callsBack = PerformsOnDeinit(loop)] in
          withExtendedLifetime((holder, callsBack)) {}
        }
        try? loop.add(source, to: "x")
        source.invalidate()
        otherValid.value = other.isValid
      }
      #expect(completesWithin(seconds: 5) { thread.join() }, "invalidate() deadlocked")
      #expect(otherValid.value == false, "releasing the closure did not run the deinit")
    }
  }
}

/// Runs `body` on a helper thread and reports whether it returned within `seconds`. A body
/// that never returns is left blocked (the test has already failed by then).
func completesWithin(seconds: Double, _ body: @escaping @Sendable () -> Void) -> Bool {
  let done = DispatchSemaphore(value: 0)
  let helper = TestThread {
    body()
    done.signal()
  }
  let returned = done.wait(timeout: .now() + seconds) == .success
  if returned { helper.join() }
  return returned
}
