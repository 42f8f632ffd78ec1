import Foundation
import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Ports") struct Ports {
    @Test(
      "A port's handler gets every message sent from another thread, in order, and the run counts it as handled"
    )
    func test_portOrderAndHandled() throws {
      let received = Box<[Int]>([])
      let port = try LoopPort<Int> { received.value.append($0) }
      let results = Box<[Loop.RunResult]>([])
      let thread = LoopThread { loop in
        while received.value.count < 1000 {
          results.value.append(loop.run(for: .seconds(10), returnAfterSourceHandled: true))
        }
      }
      try thread.loop.add(port, to: .default)
      thread.start()
      #expect(waitUntil { thread.loop.isWaiting })
      for value in 0..<1000 { try port.send(value) }
      thread.join()
      #expect(received.value == Array(0..<1000))
      #expect(results.value.allSatisfy { $0 == .handledSource })
      // How the burst is split into handler calls depends on scheduling; every call must have
      // delivered at least one message.
      #expect(results.value.count <= 1000)
    }

    @Test("Invalidating a port returns undelivered messages; later sends throw")
    func test_portInvalidate() throws {
      let port = try LoopPort<String> { _ in }
      try port.send("a")
      try port.send("b")
      #expect(port.pendingCount == 2)
      #expect(port.invalidate() == ["a", "b"])
      #expect(!port.isValid)
      #expect(throws: LoopError.invalidated(item: "LoopPort")) { try port.send("c") }
    }

    @Test("A port added and then dropped by its owner keeps the thread's loop alive until removed")
    func test_portKeepsLoopAlive() throws {
      // Checked here, not on the loop's thread, so a failure is reported under this test.
      let seen = try onLoopThread {
        loop -> (handleGone: Bool, runs: [Loop.RunResult], wasIn: Bool) in
        var port: LoopPort<Never>? = try LoopPort<Never> { _ in }
        weak let handle = port
        // Its registration (internal): the owner's handle is gone below, and removing the
        // port is removing this source.
        let registration = port!.source
        try loop.add(port!, to: .default)
        port = nil
        let alive = loop.run(for: .milliseconds(50))
        let wasIn = loop.contains(registration, in: .default)
        loop.remove(registration, from: .default)
        // Nothing is left: the run ends at once instead of running out its time.
        let removed = loop.run(for: .seconds(10))
        return (handle == nil, [alive, removed], wasIn)
      }
      #expect(seen.handleGone, "the owner's handle was not dropped")
      #expect(seen.wasIn)
      #expect(seen.runs == [.timedOut, .finished])
    }
  }

  @Suite("Descriptions and bad input") struct DescriptionsAndBadInput {
    @Test("The debug description lists modes with their sources, timers and observers")
    func test_description() throws {
      let text = try onLoopThread { loop in
        let pipe = makePipe()
        defer {
          close(pipe.read)
          close(pipe.write)
        }
        try loop.add(ManualSource(order: 3) {}, to: .default)
        try loop.add(DescriptorSource(fileDescriptor: pipe.read) { _, _ in }, to: "net")
        try loop.add(LoopTimer(after: .seconds(5), repeating: .seconds(1)) { _ in }, to: .default)
        try loop.add(LoopObserver(activities: [.entry, .exit]) { _, _ in }, to: .default)
        return loop.debugDescription
      }
      #expect(text.contains("mode \"default\""))
      #expect(text.contains("mode \"net\""))
      #expect(text.contains("ManualSource(order: 3"))
      #expect(text.contains("DescriptorSource(fd:"))
      #expect(text.contains("LoopTimer(next fire:"))
      #expect(text.contains("every 1.0 seconds"))
      #expect(text.contains("LoopObserver(activities: [entry, exit]"))
    }

    @Test("Empty mode names and .common as a real mode are refused")
    func test_badModes() throws {
      try onLoopThread { loop in
        #expect(throws: LoopError.invalidMode(name: "")) { try loop.add(ManualSource {}, to: "") }
        #expect(throws: LoopError.invalidMode(name: "common")) { try loop.addCommonMode(.common) }
        #expect(loop.run(in: "", for: .zero) == .finished)
      }
    }

    @Test("Every error message names the value and, for system calls, the errno")
    func test_errorMessages() {
      let error = LoopError.system(
        SystemError(operation: "epoll_ctl(ADD)", subject: "fd 42", errno: EBADF))
      #expect(
        error.description == "epoll_ctl(ADD) on fd 42 failed: Bad file descriptor (EBADF, errno 9)")
      #expect(
        LoopError.invalidArgument(name: "timer interval", value: "nan s", reason: "rule")
          .description == "timer interval nan s is not valid: rule")
    }
  }
}
