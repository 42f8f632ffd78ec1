import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// Issue 10, defect 2: an item that can never run again lets go of its closures, and of
/// everything they captured — as `CFRunLoopTimerInvalidate` releases its context and NIO's
/// `testCancelledScheduledTasksDoNotHoldOnToRunClosure` checks. Each test keeps the item
/// itself alive and checks, through a weak reference, that the captured object is gone.
extension RunLoopKitTests {
  @Suite("Invalid items release their closures") struct ClosureRelease {
    @Test("ManualSource: invalidate() releases perform, schedule and cancel")
    func manualSource() throws {
      let (source, released) = capturingCanary { canary in
        ManualSource(
          schedule: { _, _ in _ = canary }, cancel: { _, _ in _ = canary },
          perform: { _ = canary })
      }
      let seen = try releasedOnlyByInvalidate(source, released) {
        try $0.add($1, to: .default)
      } invalidate: {
        $0.invalidate()
      }
      #expect(seen == (false, true))
    }

    @Test("DescriptorSource: invalidate() releases the handler")
    func descriptorSource() throws {
      try withPipe { pipe in
        let (source, released) = capturingCanary { canary in
          DescriptorSource(fileDescriptor: pipe.read) { _, _ in _ = canary }
        }
        let seen = try releasedOnlyByInvalidate(source, released) {
          try $0.add($1, to: .default)
        } invalidate: {
          $0.invalidate()
        }
        #expect(seen == (false, true))
      }
    }

    @Test("LoopPort: invalidate() releases the handler")
    func port() throws {
      let (port, released) = try capturingCanary { canary in
        try LoopPort<Int> { _ in _ = canary }
      }
      let seen = try releasedOnlyByInvalidate(port, released) {
        try $0.add($1, to: .default)
      } invalidate: {
        $0.invalidate()
      }
      #expect(seen == (false, true))
    }

    @Test("LoopTimer: invalidate() releases the handler, added or not")
    func timer() throws {
      let (added, addedReleased) = try capturingCanary { canary in
        try LoopTimer(after: .seconds(3600), repeating: .seconds(1)) { _ in _ = canary }
      }
      let (loose, looseReleased) = try capturingCanary { canary in
        try LoopTimer(after: .seconds(3600)) { _ in _ = canary }
      }
      try onLoopThread { loop in
        try loop.add(added, to: .common)
        #expect(!addedReleased())
        added.invalidate()
        #expect(addedReleased())
      }
      loose.invalidate()
      #expect(looseReleased())
      withExtendedLifetime((added, loose)) {}
    }

    @Test(
      "Loop.perform: a block releases what it captured as soon as it has run, before the next block"
    )
    func performedBlockReleasedBeforeTheNext() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        for index in 0..<3 {
          let (block, released) = capturingCanary { canary in
            { @Sendable in
              _ = canary
              recorder.log("ran \(index)")
            }
          }
          try loop.perform(in: .default) { block() }
          try loop.perform(in: .default) { recorder.log("released \(index): \(released())") }
        }
        loop.run(for: .zero)
      }
      #expect(
        recorder.all
          == (0..<3).flatMap { index in
            ["ran \(index)", "released \(index): true"]
          })
    }

    @Test("LoopTimer: a one-shot timer releases its handler once it has fired")
    func oneShotTimerAfterFiring() throws {
      let fired = Box(0)
      let (timer, released) = try capturingCanary { canary in
        try LoopTimer(after: .milliseconds(1)) { _ in
          _ = canary
          fired.value += 1
        }
      }
      try onLoopThread { loop in
        try loop.add(timer, to: .default)
        #expect(loop.run(for: .seconds(5)) == .finished)
      }
      #expect(fired.value == 1)
      #expect(!timer.isValid)
      #expect(released())
    }

    @Test("LoopTimer: a repeating timer invalidated in its own handler releases it")
    func timerInvalidatedInItsHandler() throws {
      let (timer, released) = try capturingCanary { canary in
        try LoopTimer(after: .milliseconds(1), repeating: .milliseconds(1)) { timer in
          _ = canary
          timer.invalidate()
        }
      }
      try onLoopThread { loop in
        try loop.add(timer, to: .default)
        loop.run(for: .seconds(5))
      }
      #expect(released())
    }

    @Test("LoopObserver: invalidate() releases the handler; a one-shot observer once told")
    func observer() throws {
      let (repeating, repeatingReleased) = capturingCanary { canary in
        LoopObserver(activities: .all) { _, _ in _ = canary }
      }
      let (once, onceReleased) = capturingCanary { canary in
        LoopObserver(activities: .entry, repeats: false) { _, _ in _ = canary }
      }
      try onLoopThread { loop in
        try loop.add(ManualSource {}, to: .default)
        try loop.add(repeating, to: .default)
        try loop.add(once, to: .default)
        loop.run(for: .zero)
        #expect(!once.isValid)
        #expect(onceReleased())
        #expect(!repeatingReleased())
        repeating.invalidate()
        #expect(repeatingReleased())
      }
      withExtendedLifetime((repeating, once)) {}
    }

    @Test("Two racing invalidate() calls: cancel runs once, and only after the detach")
    func racingInvalidations() throws {
      let cancels = Counter()
      let thread = LoopThread { loop in loop.run(in: "idle", for: .seconds(30)) }
      let source = ManualSource(cancel: { _, _ in cancels.increment() }, perform: {})
      try thread.loop.add(source, to: .default)
      try thread.loop.add(ManualSource {}, to: "idle")
      thread.start()
      #expect(waitUntil { thread.loop.isWaiting })
      // The interleaving is forced, with no timing: while the test holds the loop's lock,
      // whichever helper marks the source invalid first cannot finish (its detach needs the
      // lock), so a helper that returns is the second call, and it returned while the first
      // one is still between marking and detaching. Nothing here ever takes the lock twice.
      let returned = Recorder()
      thread.loop.lock.lock()
      let helpers = ["A", "B"].map { name in
        TestThread {
          source.invalidate()
          returned.log(name)
        }
      }
      let secondReturned = waitUntil(seconds: 10) { !returned.all.isEmpty }
      let returnedWhileHeld = returned.all.count
      let validWhileHeld = source.isValid
      let cancelsWhileHeld = cancels.value
      thread.loop.lock.unlock()
      for helper in helpers { helper.join() }
      #expect(secondReturned, "neither invalidate() returned while the loop's lock was held")
      // Exactly one call got through: the other is the first one, parked before its detach.
      #expect(returnedWhileHeld == 1)
      #expect(!validWhileHeld)
      // The second call neither ran cancel nor dropped it before the first had detached.
      #expect(cancelsWhileHeld == 0)
      #expect(returned.all.count == 2)
      #expect(cancels.value == 1)
      // The loop was not disturbed: it still sleeps in "idle" and stops when told.
      #expect(waitUntil { thread.loop.isWaiting })
      thread.loop.stop()
      thread.join()
      #expect(cancels.value == 1)
    }

    @Test("Thread exit invalidates every item still scheduled and releases its closures")
    func threadExit() throws {
      let canaries = CanaryFactory()
      let pipe = makePipe()
      defer {
        close(pipe.read)
        close(pipe.write)
      }
      let items = try onLoopThread { loop in
        let source = ManualSource(perform: canaries.capture())
        let descriptor = DescriptorSource(fileDescriptor: pipe.read, handler: canaries.capture())
        let port = try LoopPort<Int>(handler: canaries.capture())
        let timer = try LoopTimer(after: .seconds(3600), handler: canaries.capture())
        let observer = LoopObserver(activities: .all, handler: canaries.capture())
        try loop.add(source, to: .default)
        try loop.add(descriptor, to: .common)
        try loop.add(port, to: "other")
        try loop.add(timer, to: .default)
        try loop.add(observer, to: .default)
        // A block queued for a mode that never runs runs as the thread exits, then goes.
        try loop.perform(in: "never", canaries.capture())
        return (source, descriptor, port, timer, observer)
      }
      let checks = canaries.checks
      #expect(checks.count == 6)
      for (index, check) in checks.enumerated() {
        #expect(check(), "canary \(index) is still alive after the thread exited")
      }
      #expect(!items.0.isValid && !items.1.isValid && !items.2.isValid)
      #expect(!items.3.isValid && !items.4.isValid)
      withExtendedLifetime(items) {}
    }
  }
}

/// Adds `item` to a fresh thread's loop, then invalidates it there; returns whether the canary
/// was released just before the invalidation and just after it. The item stays referenced.
func releasedOnlyByInvalidate<Item: Sendable>(
  _ item: Item, _ released: @escaping @Sendable () -> Bool,
  add: @escaping @Sendable (Loop, Item) throws -> Void,
  invalidate: @escaping @Sendable (Item) -> Void
) throws -> (before: Bool, after: Bool) {
  let seen = try onLoopThread { loop -> (Bool, Bool) in
    try add(loop, item)
    let before = released()
    invalidate(item)
    return (before, released())
  }
  withExtendedLifetime(item) {}
  return seen
}

/// An object whose release a test watches through a weak reference.
final class Canary: Sendable {}

/// Builds an item with `make`, which captures the canary it is given in the item's closures,
/// and returns the item with a check that tells whether that canary has been released.
func capturingCanary<Item>(
  _ make: (Canary) throws -> Item
) rethrows -> (Item, released: @Sendable () -> Bool) {
  var canary: Canary? = Canary()
  weak let watched = canary
  let item = try make(canary!)
  canary = nil
  return (item, { watched == nil })
}

/// Hands out closures of any shape that each capture a fresh canary, and remembers how to
/// check each canary's release.
final class CanaryFactory: @unchecked Sendable {  // `watched` is guarded by `lock`
  private let lock = NSLock()
  private var watched: [WeakCanary] = []

  /// Only ever read after `init`; weak loads are atomic in the Swift runtime.
  private final class WeakCanary: Sendable {
    weak let canary: Canary?
    init(_ canary: Canary) { self.canary = canary }
  }

  func capture<each Argument>() -> @Sendable (repeat each Argument) -> Void {
    let canary = Canary()
    lock.withLock { watched.append(WeakCanary(canary)) }
    return { (_: repeat each Argument) in _ = canary }
  }

  var checks: [@Sendable () -> Bool] {
    lock.withLock { watched.map { entry in { @Sendable in entry.canary == nil } } }
  }
}
