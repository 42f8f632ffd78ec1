import Foundation
import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Blocks and common modes") struct BlocksAndCommonModes {
    @Test(
      "45. A block for mode X does not run in default; it runs when X runs, and keeps X from being empty"
    )
    func test_45_blockForOtherMode() throws {
      let recorder = Recorder()
      let (inDefault, inX) = try onLoopThread { loop in
        try loop.add(ManualSource {}, to: .default)
        try loop.perform(in: ["X"]) { recorder.log("ran in \(loop.currentMode!)") }
        let inDefault = loop.run(for: .milliseconds(50))
        #expect(recorder.all.isEmpty)
        let inX = loop.run(in: "X", for: .seconds(5))
        return (inDefault, inX)
      }
      #expect(inDefault == .timedOut)
      // X held nothing but the block: it ran, then X was empty.
      #expect(inX == .finished)
      #expect(recorder.all == ["ran in X"])
    }

    @Test(
      "A mode named at run time is the predefined mode of that name: equal, same hash, same blocks")
    func modesNamedAtRunTime() throws {
      let defaultName = ["de", "fault"].joined()
      let commonName = ["com", "mon"].joined()
      #expect(Loop.Mode(defaultName) == .default && Loop.Mode(commonName) == .common)
      #expect(Set([Loop.Mode(defaultName), .default, Loop.Mode(commonName), .common]).count == 2)
      #expect(Loop.Mode("defaults") != .default && Loop.Mode("X") != "Y")
      let recorder = Recorder()
      try onLoopThread { loop in
        try loop.addCommonMode("X")
        try loop.perform(in: Loop.Mode(defaultName)) {
          recorder.log("default-named in \(loop.currentMode!)")
        }
        try loop.perform(in: Loop.Mode(commonName)) {
          recorder.log("common-named in \(loop.currentMode!)")
        }
        try loop.add(ManualSource {}, to: "X")
        loop.run(in: "X", for: .zero)
        loop.run(for: .zero)
      }
      #expect(recorder.all == ["common-named in X", "default-named in default"])
    }

    @Test("46. A block for .common runs in default and in any mode of the common set")
    func test_46_commonBlocks() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        try loop.addCommonMode("X")
        try loop.perform { recorder.log(whereItRan(loop)) }
        loop.run(for: .zero)
        try loop.perform { recorder.log(whereItRan(loop)) }
        loop.run(in: "X", for: .zero)
        try loop.perform { recorder.log(whereItRan(loop)) }
        try loop.add(ManualSource {}, to: "Y")
        loop.run(in: "Y", for: .zero)
        recorder.log("last run returned")
      }
      // Not in Y (outside the common set); the thread's exit runs what its loop accepted.
      #expect(
        recorder.all == [
          "ran in default", "ran in X", "last run returned", "ran as the thread exited",
        ])
    }

    @Test("47. A block queued from inside a block runs on a later drain, not recursively")
    func test_47_blockFromBlock() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        try loop.add(ManualSource {}, to: .default)
        try loop.perform {
          recorder.log("outer start")
          try? loop.perform { recorder.log("inner") }
          recorder.log("outer end")
        }
        loop.run(for: .milliseconds(20))
      }
      #expect(recorder.all == ["outer start", "outer end", "inner"])
    }

    @Test("48. perform from another thread wakes a sleeping loop and the block runs promptly")
    func test_48_performWakes() throws {
      let ranAt = Box<LoopClock.Instant?>(nil)
      let result = Box<Loop.RunResult?>(nil)
      let thread = LoopThread { loop in result.value = loop.run(for: .seconds(30)) }
      try thread.loop.add(ManualSource {}, to: .default)
      thread.start()
      #expect(waitUntil { thread.loop.isWaiting })
      let posted = LoopClock.Instant.now
      try thread.loop.perform {
        ranAt.value = .now
        thread.loop.stop()
      }
      thread.join()
      #expect(result.value == .stopped)
      #expect(ranAt.value.map { posted.duration(to: $0) < .seconds(2) } == true)
    }

    @Test("49. Items added to .common, then addCommonMode(X): all of them are in X")
    func test_49_addCommonModeBringsItems() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        let pipe = makePipe()
        defer {
          close(pipe.read)
          close(pipe.write)
        }
        let source = ManualSource(schedule: { _, mode in recorder.log("schedule \(mode)") }) {}
        let descriptor = DescriptorSource(fileDescriptor: pipe.read) { _, _ in
          recorder.log("fd in \(loop.currentMode!)")
          drain(pipe.read)
        }
        let timer = try LoopTimer(after: .seconds(60)) { _ in }
        let observer = LoopObserver(activities: .entry) { _, _ in
          recorder.log("entry \(loop.currentMode!)")
        }
        try loop.add(source, to: .common)
        try loop.add(descriptor, to: .common)
        try loop.add(timer, to: .common)
        try loop.add(observer, to: .common)
        try loop.addCommonMode("X")
        #expect(loop.commonModes == [.default, "X"])
        #expect(loop.contains(source, in: "X"))
        #expect(loop.contains(descriptor, in: "X"))
        #expect(loop.contains(timer, in: "X"))
        #expect(loop.contains(observer, in: "X"))
        writeByte(pipe.write)
        loop.run(in: "X", for: .seconds(5), returnAfterSourceHandled: true)
        loop.remove(timer, from: .common)
        #expect(!loop.contains(timer, in: "X"))
        #expect(!loop.contains(timer, in: .default))
      }
      #expect(recorder.all == ["schedule default", "schedule X", "entry X", "fd in X"])
    }
  }
}

/// "ran in <mode>", or, for a block run by its thread's exit (no mode runs), says so.
private func whereItRan(_ loop: Loop) -> String {
  loop.currentMode.map { "ran in \($0)" } ?? "ran as the thread exited"
}
