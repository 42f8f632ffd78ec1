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
    func plainThreadExits() throws {
      let setUp = Box<(any Error)?>(nil)
      let thread = TestThread {
        do { try ReleaseOutsideLock.addReproduction(to: Loop.current) } catch {
          setUp.value = error
        }
      }
      #expect(completesWithin(seconds: 5) { thread.join() }, "the exiting thread deadlocked")
      if let error = setUp.value { throw error }
    }

    @Test("Items of a mode that is not common, and of .common, are released after the lock")
    func everyModeIsReleasedOutsideTheLock() throws {
      let setUp = Box<(any Error)?>(nil)
      let thread = TestThread {
        let loop = Loop.current
        do {
          try ReleaseOutsideLock.addReproduction(to: loop, mode: "tracking")
          try ReleaseOutsideLock.addReproduction(to: loop, mode: .common)
          let callsBack = PerformsOnDeinit(loop)
          try loop.add(
            LoopTimer(after: .seconds(3600)) { _ in withExtendedLifetime(callsBack) {} },
            to: "other")
          try loop.add(
            LoopObserver(activities: .entry) { _, _ in withExtendedLifetime(callsBack) {} },
            to: "other")
        } catch { setUp.value = error }
      }
      #expect(completesWithin(seconds: 5) { thread.join() }, "the exiting thread deadlocked")
      if let error = setUp.value { throw error }
    }

    @Test("A resident thread with the same items stops and joins within 5 s")
    func residentThreadJoins() throws {
      let thread = try ResidentThread(name: "finalize")
      try thread.performAndWait { try ReleaseOutsideLock.addReproduction(to: thread.loop) }
      thread.stop()
      #expect(completesWithin(seconds: 5) { try? thread.join() }, "join() never returned")
    }

    @Test("Invalidating an item whose closure holds the last reference to such an object")
    func invalidateReleases() throws {
      let setUp = Box<(any Error)?>(nil)
      let otherValid = Box<[Bool]>([])
      let thread = TestThread {
        let loop = Loop.current
        let other = ManualSource {}
        // The source's closure holds the only references to both objects.
        let source = ManualSource {
          [holder = InvalidatesOnDeinit(other), callsBack = PerformsOnDeinit(loop)] in
          withExtendedLifetime((holder, callsBack)) {}
        }
        do {
          try loop.add(other, to: .default)
          try loop.add(source, to: "x")
        } catch {
          setUp.value = error
          return
        }
        otherValid.value.append(other.isValid)
        source.invalidate()
        otherValid.value.append(other.isValid)
      }
      #expect(completesWithin(seconds: 5) { thread.join() }, "invalidate() deadlocked")
      if let error = setUp.value { throw error }
      // Valid until the source let go of its closure, whose release ran the deinit.
      #expect(otherValid.value == [true, false], "releasing the closure did not run the deinit")
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
