import Foundation
import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Validation and error messages") struct Validation {
    @Test(
      "70. Every timer initialiser treats a negative delay the same way: the timer fires on the next pass"
    )
    func test_70_negativeDelays() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        let timers = [
          try LoopTimer(label: "duration", after: .seconds(-1)) { _ in recorder.log("duration") },
          try LoopTimer(label: "seconds", afterSeconds: -1) { _ in recorder.log("seconds") },
          try LoopTimer(label: "date", fireAt: .now.advanced(by: .seconds(-1))) { _ in
            recorder.log("date")
          },
        ]
        for timer in timers { try loop.add(timer, to: .default) }
        try loop.perform(after: .seconds(-1), in: [.default]) { recorder.log("perform") }
        // One pass, no sleep: everything with a negative delay is due on it.
        loop.run(for: .zero)
      }
      #expect(Set(recorder.all) == ["duration", "seconds", "date", "perform"])
      #expect(recorder.all.count == 4)
    }

    @Test("70. Every validation error states the rule that was broken")
    func test_70_errorsStateTheRule() throws {
      func message(_ body: () throws -> Void) -> String {
        do {
          try body()
          return "accepted"
        } catch {
          return "\(error)"
        }
      }
      let cases: [(String, () throws -> Void)] = [
        (
          "timer interval 0.0 seconds is not valid: a repeat interval must be greater than zero",
          { _ = try LoopTimer(after: .zero, repeating: .zero) { _ in } }
        ),
        (
          "timer interval -2.0 seconds is not valid: a repeat interval must be greater than zero",
          { _ = try LoopTimer(afterSeconds: 0, repeatingEverySeconds: -2) { _ in } }
        ),
        (
          "timer tolerance -1.0 seconds is not valid: a tolerance must not be negative",
          { _ = try LoopTimer(after: .zero, tolerance: .seconds(-1)) { _ in } }
        ),
        (
          "timer tolerance -0.5 seconds is not valid: a tolerance must not be negative",
          { _ = try LoopTimer(afterSeconds: 0, toleranceSeconds: -0.5) { _ in } }
        ),
        (
          "timer delay inf s is not valid: a time in seconds must be a finite number",
          { _ = try LoopTimer(afterSeconds: .infinity) { _ in } }
        ),
        (
          "thread name \"a-name-of-twenty-bytes\" is not valid: it is 22 bytes; Linux allows at most 15 (errno ERANGE)",
          { _ = try ResidentThread(name: "a-name-of-twenty-bytes") }
        ),
        (
          "stack size 1000 is not valid: it must be at least 16384 bytes (16 KiB) (errno EINVAL)",
          { _ = try ResidentThread(name: "s", stackSize: 1000) }
        ),
        (
          "niceness 40 is not valid: it must be in -20...19",
          { _ = try ResidentThread(name: "n", niceness: 40) }
        ),
        (
          "CPU affinity [] is not valid: a CPU set must name at least one CPU",
          { _ = try ResidentThread(name: "c", cpuAffinity: []) }
        ),
        (
          "CPU affinity 5000 is not valid: CPUs are numbered 0 to 1023",
          { _ = try ResidentThread(name: "c", cpuAffinity: [5000]) }
        ),
        (
          "mode name \"\" cannot be used: a mode needs a non-empty name",
          { try Loop.current.add(ManualSource {}, to: "") }
        ),
        (
          "modes [] is not valid: a block needs at least one mode to run in",
          { try Loop.current.perform(after: .zero, in: []) {} }
        ),
      ]
      for (expected, body) in cases {
        #expect(message(body) == expected)
      }
    }

    @Test(
      "70. A regular file is refused with a message naming its type and saying it cannot be polled")
    func test_70_regularFile() throws {
      let path = "/tmp/runloopkit-regular-\(getpid())"
      let fd = open(path, O_CREAT | O_RDWR, 0o600)
      defer {
        close(fd)
        unlink(path)
      }
      let text = try onLoopThread { loop -> String in
        do {
          try loop.add(DescriptorSource(fileDescriptor: fd) { _, _ in }, to: .default)
          return "accepted"
        } catch {
          return "\(error)"
        }
      }
      #expect(text.hasPrefix("epoll_ctl(ADD) on fd \(fd) failed: Operation not permitted (EPERM"))
      #expect(text.contains("fd \(fd) is a regular file, which does not support epoll"))
    }

    @Test("An item removed from a loop whose thread exited cannot join another loop")
    func itemsAreBoundForLife() throws {
      let timer = try LoopTimer(after: .seconds(60)) { _ in }
      try onLoopThread { loop in
        try loop.add(timer, to: .default)
        loop.remove(timer, from: .default)  // removed, not invalidated: still bound
      }
      // The first loop's thread is gone, and its teardown invalidated every item bound to it,
      // in a mode or not (issue 28, defect 3): the timer can join no other loop.
      #expect(!timer.isValid)
      #expect(throws: LoopError.invalidated(item: "LoopTimer")) {
        try onLoopThread { loop in try loop.add(timer, to: .default) }
      }
      // A failed first add leaves the item free.
      let source = ManualSource {}
      #expect(throws: LoopError.self) { try Loop.current.add(source, to: "") }
      try onLoopThread { loop in try loop.add(source, to: .default) }
    }

    @Test("A loop is freed when its thread exits, though the items it held live on")
    func loopFreedAfterItsThreadExits() throws {
      // Items hold their loop strongly while valid; the loop holds the items in its modes.
      // Teardown invalidates every item the loop held, which must break each such cycle.
      let timer = try LoopTimer(after: .seconds(3600)) { _ in }
      let source = ManualSource {}
      let observer = LoopObserver(activities: .entry) { _, _ in }
      let (readEnd, writeEnd) = makePipe()
      defer {
        close(readEnd)
        close(writeEnd)
      }
      let descriptor = DescriptorSource(fileDescriptor: readEnd) { _, _ in }
      weak let loop: Loop? = try onLoopThread { loop in
        try loop.add(timer, to: .default)
        try loop.add(source, to: "M")
        try loop.add(observer, to: .common)
        try loop.add(descriptor, to: .default)
        return loop
      }
      #expect(loop == nil, "an item the torn-down loop held still keeps it alive")
      #expect(!timer.isValid && !source.isValid && !observer.isValid && !descriptor.isValid)
    }

    @Test(
      "89. A removed item is invalidated by its loop's teardown like the others, and lets the loop go"
    )
    func removedItemIsInvalidatedByTeardown() throws {
      let timer = try LoopTimer(after: .seconds(3600)) { _ in }
      weak let loop: Loop? = try onLoopThread { loop in
        try loop.add(timer, to: .default)
        loop.remove(timer, from: .default)  // valid, bound, and in no mode at teardown
        return loop
      }
      #expect(!timer.isValid, "teardown did not reach an item bound to the loop in no mode")
      #expect(loop == nil, "an item invalidated by teardown still keeps its loop alive")
    }

    @Test("A torn-down loop refuses every kind of item, in the modes it used last too")
    func tornDownLoopRefusesItemsInModesItUsed() throws {
      let loop = try onLoopThread { loop in
        // Modes the loop used (the last one it looked up is remembered for the next add).
        try loop.add(LoopTimer(after: .seconds(3600)) { _ in }, to: "M")
        try loop.add(ManualSource {}, to: "M")
        return loop
      }
      let tornDown = LoopError.loopTornDown(thread: loop.threadDescription)
      #expect(throws: tornDown) { try loop.add(LoopTimer(after: .seconds(1)) { _ in }, to: "M") }
      #expect(throws: tornDown) { try loop.add(ManualSource {}, to: "M") }
      #expect(throws: tornDown) {
        try loop.add(LoopObserver(activities: .entry) { _, _ in }, to: "M")
      }
      #expect(throws: tornDown) { try loop.perform(in: "M") {} }
    }

    @Test("Errors about a resident thread's loop name the thread")
    func errorsNameTheResidentThread() throws {
      let thread = try ResidentThread(name: "net-io")
      let loop = thread.loop
      thread.stop()
      try thread.join()
      let text = "\(LoopError.loopTornDown(thread: loop.threadDescription))"
      #expect(
        text
          == "the loop of thread \(loop.threadID) \"net-io\" was torn down when its thread exited")
      #expect(throws: LoopError.loopTornDown(thread: loop.threadDescription)) {
        try loop.add(ManualSource {}, to: .default)
      }
    }
  }
}
