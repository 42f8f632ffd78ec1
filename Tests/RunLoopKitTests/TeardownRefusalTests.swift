import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// Issue 28, defect 3 (checklist line 89): teardown reached only the items in a mode or in
/// `.common`, so a port taken out of its modes but still bound went on accepting sends that
/// no one would ever read, and a removed item stayed valid. Now the loop also keeps (weakly)
/// every item bound to it and in no mode, and its teardown invalidates them all.
extension RunLoopKitTests {
  @Suite("Teardown reaches every bound item") struct TeardownRefusal {
    @Test(
      "89. A LoopPort removed from its modes but still bound refuses sends once its loop's thread exited"
    )
    func test_89_removedPortRefusesSendsAfterTeardown() throws {
      let delivered = Recorder()
      let port = try LoopPort<Int> { delivered.log("\($0)") }
      let loop = try onLoopThread { loop -> Loop in
        try loop.add(port, to: .default)
        loop.remove(port, from: .default)
        try port.send(1)  // accepted while the thread lives: kept for invalidate()
        return loop
      }
      #expect(!port.isValid)
      #expect(throws: LoopError.loopTornDown(thread: loop.threadDescription)) { try port.send(2) }
      #expect(port.invalidate() == [1])
      #expect(delivered.all.isEmpty)
    }

    @Test(
      "89. Every kind of item removed from its modes and kept is invalid after its loop's teardown, its closures released"
    )
    func test_89_removedItemsAreInvalidatedByTeardown() throws {
      try withPipe { pipe in
        let factory = CanaryFactory()
        let source = ManualSource(
          schedule: factory.capture(), cancel: factory.capture(), perform: factory.capture())
        let descriptor = DescriptorSource(
          fileDescriptor: pipe.read, handler: factory.capture())
        let timer = try LoopTimer(after: .seconds(3600), handler: factory.capture())
        let observer = LoopObserver(activities: .all, handler: factory.capture())
        let port = try LoopPort<Int>(handler: factory.capture())
        try onLoopThread { loop in
          try loop.add(source, to: .default)
          try loop.add(descriptor, to: "other")
          try loop.add(timer, to: .common)
          try loop.add(observer, to: .default)
          try loop.add(port, to: .default)
          loop.remove(source, from: .default)
          loop.remove(descriptor, from: "other")
          loop.remove(timer, from: .common)
          loop.remove(observer, from: .default)
          loop.remove(port, from: .default)
          #expect(
            !factory.checks.contains { $0() }, "a removed item let go of its closures too early")
        }
        #expect(!source.isValid)
        #expect(!descriptor.isValid)
        #expect(!timer.isValid)
        #expect(!observer.isValid)
        #expect(!port.isValid)
        #expect(factory.checks.count == 7)
        #expect(
          factory.checks.allSatisfy { $0() },
          "a removed item kept its closures after its loop was gone")
      }
    }

    @Test(
      "A removed item that nobody holds is freed while its loop's thread lives on (the loop holds it weakly)"
    )
    func removedItemIsNotKeptByItsLoop() throws {
      let freed = try onLoopThread { loop -> Bool in
        var timer: LoopTimer? = try LoopTimer(after: .seconds(3600)) { _ in }
        weak let watched = timer
        try loop.add(timer!, to: .default)
        loop.remove(timer!, from: .default)
        timer = nil
        return watched == nil
      }
      #expect(freed)
    }

    @Test(
      "An invalidated item leaves the loop's table of removed items; one added back is torn down with its mode"
    )
    func unscheduledItemsBookkeeping() throws {
      let (listedThenGone, readded) = try onLoopThread { loop -> (Bool, LoopTimer) in
        let gone = try LoopTimer(after: .seconds(3600)) { _ in }
        try loop.add(gone, to: .default)
        loop.remove(gone, from: .default)
        let listed = !loop.lock.withLock { loop.unscheduledItems.isEmpty }
        gone.invalidate()
        let emptied = loop.lock.withLock { loop.unscheduledItems.isEmpty }
        let timer = try LoopTimer(after: .seconds(3600)) { _ in }
        try loop.add(timer, to: .default)
        loop.remove(timer, from: .default)
        try loop.add(timer, to: "other")
        return (listed && emptied, timer)
      }
      #expect(listedThenGone)
      #expect(!readded.isValid)
    }
  }
}
