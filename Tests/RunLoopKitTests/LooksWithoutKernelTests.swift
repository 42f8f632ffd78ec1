import Foundation
import Testing

@testable import RunLoopKit

/// Checklist line 103: a pass that only looks, in a mode with no descriptor to watch, asks the
/// kernel nothing (`Metrics.looksWithoutKernel` counts such looks), and still sees all that a
/// look at the epoll set would have shown: a timer due, posted work, a descriptor that joins.
extension RunLoopKitTests {
  @Suite("A look at a mode with no descriptor makes no syscall") struct LooksWithoutKernelTests {
    @Test(
      "103. Zero-length runs in a mode with only a manual source ask the kernel nothing, one look each"
    )
    func test_103_looksWithoutDescriptorsAskNoKernel() throws {
      try onLoopThread { loop in
        let source = ManualSource {}
        try loop.add(source, to: .default)
        let before = loop.metrics
        for _ in 0..<100 { #expect(loop.run(for: .zero) == .timedOut) }
        let after = loop.metrics
        #expect(after.passes - before.passes == 100)
        #expect(after.waits - before.waits == 100)
        #expect(after.looksWithoutKernel - before.looksWithoutKernel == 100)
        source.invalidate()
      }
    }

    @Test(
      "103. A timer already due fires on a look that asks no kernel, in the sleeping and in the spinning wait policy"
    )
    func test_103_dueTimerFiresWithoutKernel() throws {
      for policy in [Loop.WaitPolicy.sleep, .spinThenSleep(.microseconds(50))] {
        let fired = try onLoopThread { loop -> Int in
          loop.waitPolicy = policy
          let count = Box(0)
          let keepAlive = ManualSource {}
          try loop.add(keepAlive, to: .default)
          // The timerfd holds the date under a spinning policy: a look must not need to read it.
          let timer = try LoopTimer(after: .milliseconds(1)) { _ in count.value += 1 }
          try loop.add(timer, to: .default)
          let due = loop.now.advanced(by: .milliseconds(1))
          while loop.now < due {}  // the date passes while the loop does nothing
          let before = loop.metrics.looksWithoutKernel
          #expect(loop.run(for: .zero) == .timedOut)
          #expect(loop.metrics.looksWithoutKernel - before == 1)
          #expect(loop.run(for: .zero) == .timedOut)
          keepAlive.invalidate()
          return count.value
        }
        #expect(fired == 1, "policy \(policy)")
      }
    }

    @Test(
      "103. A mode with a descriptor to watch asks the kernel on every look, and a descriptor that joins mid-pass is seen by that pass's look"
    )
    func test_103_descriptorModesAskTheKernel() throws {
      try onLoopThread { loop in
        let pipe = makePipe()
        defer {
          close(pipe.read)
          close(pipe.write)
        }
        var byte: UInt8 = 1
        #expect(write(pipe.write, &byte, 1) == 1)
        let calls = Box(0)
        let descriptor = DescriptorSource(fileDescriptor: pipe.read) { _, _ in calls.value += 1 }
        // Added by a source's perform: the same pass's look must ask the kernel and find it.
        let adder = ManualSource { try? loop.add(descriptor, to: .default) }
        try loop.add(adder, to: .default)
        adder.signal()
        let before = loop.metrics.looksWithoutKernel
        #expect(loop.run(for: .zero) == .timedOut)
        #expect(calls.value == 1)
        // Still readable: level-triggered, so every zero-length run delivers it again.
        for _ in 0..<10 { #expect(loop.run(for: .zero) == .timedOut) }
        #expect(calls.value == 11)
        #expect(loop.metrics.looksWithoutKernel == before)
        descriptor.invalidate()
        adder.invalidate()
        // The mode has no descriptor again: looks ask nothing once more.
        let keepAlive = ManualSource {}
        try loop.add(keepAlive, to: .default)
        #expect(loop.run(for: .zero) == .timedOut)
        #expect(loop.metrics.looksWithoutKernel == before + 1)
        keepAlive.invalidate()
      }
    }

    @Test(
      "103. Blocks posted from another thread between looks that ask no kernel all run, in order, and a sleep after them is still woken"
    )
    func test_103_postsBetweenLooksWithoutKernel() throws {
      let log = Box<[Int]>([])
      let drained = DispatchSemaphore(value: 0)
      let finished = DispatchSemaphore(value: 0)
      let ended = Box<Loop.RunResult?>(nil)
      let thread = LoopThread { loop in
        // Busy looks first, then a real sleep that only the stop posted after them can end.
        while log.value.count < 500 { loop.run(for: .zero) }
        drained.signal()
        ended.value = loop.run(for: .seconds(30))
        finished.signal()
      }
      let keepAlive = ManualSource {}
      try thread.loop.add(keepAlive, to: .default)
      thread.start()
      for index in 0..<500 { try thread.loop.perform { log.value.append(index) } }
      #expect(drained.wait(timeout: .now() + 20) == .success)
      try thread.loop.perform { thread.loop.stop() }
      #expect(finished.wait(timeout: .now() + 20) == .success)
      #expect(ended.value == .stopped)
      #expect(log.value == Array(0..<500))
      #expect(thread.loop.metrics.looksWithoutKernel >= 1)
      keepAlive.invalidate()
      thread.join()
    }
  }
}
