import CRunLoopShims
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Loops and threads") struct LoopsAndThreads {
    @Test("1. Loop.current is the same object on one thread and different across threads")
    func test_01_currentIsPerThread() throws {
      let (first, second) = try onLoopThread { loop in
        (ObjectIdentifier(loop), ObjectIdentifier(Loop.current))
      }
      #expect(first == second)
      let other = try onLoopThread { _ in ObjectIdentifier(Loop.current) }
      let mine = try onLoopThread { loop in ObjectIdentifier(loop) }
      // Both threads are gone, but while alive each had its own; compare two live ones:
      let a = LoopThread { _ in }
      let b = LoopThread { _ in }
      #expect(a.loop !== b.loop)
      a.start()
      b.start()
      a.join()
      b.join()
      _ = (other, mine)
    }

    @Test(
      "2. Loop.main is the main thread's loop from any thread (the main-thread half is MainThreadTests)"
    )
    func test_02_mainLoopFromOtherThreads() throws {
      let seen = try (0..<3).map { _ in try onLoopThread { _ in ObjectIdentifier(Loop.main) } }
      #expect(Set(seen).count == 1)
      #expect(pthread_equal(Loop.main.thread, crl_main_thread()) != 0)
      let otherCurrent = try onLoopThread { loop in ObjectIdentifier(loop) }
      #expect(otherCurrent != seen[0])
    }

    @Test(
      "3. A thread that exits tears its loop down: cancel called, descriptors unregistered, no fd left open"
    )
    func test_03_teardownOnThreadExit() throws {
      let baseline = openDescriptorCount()
      let recorder = Recorder()
      let pipe = makePipe()
      let source = ManualSource(
        cancel: { _, mode in recorder.log("cancel \(mode)") }, perform: {})
      let descriptor = DescriptorSource(fileDescriptor: pipe.read) { _, _ in recorder.log("fd") }
      let timer = try LoopTimer(after: .seconds(60)) { _ in }
      let (loop, owned) = try onLoopThread { loop in
        try loop.add(source, to: .default)
        try loop.addCommonMode("tracking")
        try loop.add(descriptor, to: .common)
        try loop.add(timer, to: "other")
        return (loop, loop.ownedDescriptors)
      }
      // wake eventfd + spare epoll set and witness set (kept since the descriptor source) +
      // 3 modes × (epoll + timerfd)
      #expect(owned.count == 9)
      #expect(recorder.all == ["cancel default"])
      for fd in owned { #expect(!isOpen(fd), "fd \(fd) of the dead loop is still open") }
      #expect(!loop.contains(source, in: .default))
      #expect(!loop.contains(descriptor, in: .default))
      #expect(!loop.contains(timer, in: "other"))
      #expect(throws: LoopError.self) { try loop.perform {} }
      close(pipe.read)
      close(pipe.write)
      #expect(openDescriptorCount() == baseline)
    }

    @Test("4. Running a loop from a thread that does not own it traps with a clear message")
    func test_04_runFromOtherThreadTraps() async {
      let result = await #expect(
        processExitsWith: .failure, observing: [\.standardErrorContent]
      ) {
        let holder = Box<Loop?>(nil)
        let thread = TestThread {
          let loop = Loop.current
          try? loop.add(ManualSource {}, to: .default)
          holder.value = loop
        }
        thread.join()
        runBriefly(holder.value!)  // `run` itself is noasync, and this closure is async
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(message.contains("can only be run by its own thread"))
      #expect(message.contains("perform"))
    }
  }
}

/// Runs `loop` for 10 ms, from a synchronous context.
private func runBriefly(_ loop: Loop) { loop.run(for: .milliseconds(10)) }
