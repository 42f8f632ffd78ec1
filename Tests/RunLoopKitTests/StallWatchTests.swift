import Foundation
import Glibc
import RunLoopKit
import Testing

extension RunLoopKitTests {
  @Suite("Stall watch") struct StallWatching {
    @Test(
      "120. A 200 ms callout with a 50 ms watch is reported, with its label, mode and depth, on another thread while it runs, and once more when it returns with its total"
    )
    func longCalloutReported() throws {
      let reports = StallReports()
      let seenWhileRunning = try onLoopThread { loop -> Bool in
        let watch = try loop.watchStalls(longerThan: .milliseconds(50), reports.take)
        let seen = Box(false)
        try loop.assumeIsolated().addTimer(label: "slow timer", after: .zero) { _ in
          usleep(200_000)
          // A loaded machine may be late with the report: the callout then lasts until it
          // comes (within 10 s), so "while it runs" holds either way.
          seen.value = reports.running.wait(seconds: 10)
        }
        loop.run(in: .default, for: .seconds(30))
        // The end was told before the run returned; cancel waits for the watch's thread.
        watch.cancel()
        return seen.value
      }
      #expect(seenWhileRunning)
      let all = reports.all.value
      try #require(all.count == 2)
      let (running, ended) = (all[0], all[1])
      #expect(running.kind == .timer && running.label == "slow timer")
      #expect(running.mode == .default && running.depth == 1)
      #expect(!running.hasEnded && running.duration >= .milliseconds(50))
      #expect(ended.hasEnded && ended.duration >= .milliseconds(200))
      #expect(ended.callout == running.callout && ended.kind == .timer)
      #expect(
        running.description.hasPrefix("timer \"slow timer\" in default (depth 1): running for"))
      #expect(reports.onThread.value == ["stall watch", "stall watch"])
    }

    @Test(
      "120. Each kind of callout is reported as what it is: a block, a manual source, a descriptor source, a port, an observer, a timer, an executor job"
    )
    func everyKindReported() throws {
      let reports = StallReports()
      let (fds, fd) = (makePipe(), Box<Int32>(-1))
      defer {
        close(fds.read)
        close(fds.write)
      }
      fd.value = fds.read
      try onLoopThread { loop in
        let watch = try loop.watchStalls(longerThan: .milliseconds(30), reports.take)
        defer { watch.cancel() }
        let view = loop.assumeIsolated()
        let stall: @Sendable () -> Void = { _ = reports.running.wait(seconds: 10) }
        try loop.perform { stall() }
        loop.run(in: .default, for: .zero)
        let source = try view.addManualSource(label: "manual") { stall() }
        source.signal()
        loop.run(in: .default, for: .zero)
        source.invalidate()
        let reader = try view.addSource(fileDescriptor: fds.read, label: "pipe") { source, _ in
          stall()
          source.invalidate()
        }
        _ = write(fds.write, "x", 1)
        loop.run(in: .default, for: .seconds(10), returnAfterSourceHandled: true)
        _ = reader
        let port = try view.addPort(of: Int.self, label: "inbox") { _ in stall() }
        try port.send(1)
        loop.run(in: .default, for: .seconds(10), returnAfterSourceHandled: true)
        try view.addObserver(.beforeTimers, repeats: false) { _, _ in stall() }
        loop.run(in: .default, for: .zero)
        port.invalidate()
        // The only item left: the run ends once it has fired.
        try view.addTimer(label: "tick", after: .zero) { _ in stall() }
        loop.run(in: .default, for: .seconds(10))
        // Last: the executor, once used, keeps the mode alive with a source of its own.
        Task(executorPreference: loop.executor) { stall() }
        loop.run(in: .default, for: .zero)
      }
      let running = reports.all.value.filter { !$0.hasEnded }
      #expect(
        running.map(\.kind) == [
          .block, .manualSource, .descriptor(fd: fd.value), .port, .observer(.beforeTimers),
          .timer, .job,
        ])
      #expect(running.map(\.label) == [nil, "manual", "pipe", "inbox", nil, "tick", nil])
      #expect(reports.all.value.filter(\.hasEnded).map(\.callout) == running.map(\.callout))
    }

    @Test(
      "120. Short callouts in a row are not a stall, nor a nested run asleep inside a callout; a stalled callout of a nested run is reported at depth 2 in its mode"
    )
    func progressIsNotAStall() throws {
      let reports = StallReports()
      let nested = Loop.Mode("nested")
      try onLoopThread { loop in
        let watch = try loop.watchStalls(longerThan: .milliseconds(400), reports.take)
        defer { watch.cancel() }
        for _ in 0..<100 { try loop.perform { usleep(5_000) } }
        loop.run(in: .default, for: .zero)
        let view = loop.assumeIsolated()
        let port = try view.addPort(of: Int.self, to: nested) { _ in }  // keeps it alive
        try loop.perform { loop.run(in: nested, for: .milliseconds(900)) }
        loop.run(in: .default, for: .zero)
        #expect(reports.all.value.isEmpty, "no stall yet")
        port.invalidate()
        // The nested mode's only item: its run ends once it has fired.
        try view.addTimer(label: "inner", after: .zero, to: nested) { _ in
          _ = reports.running.wait(seconds: 10)
        }
        try loop.perform { loop.run(in: nested, for: .seconds(10)) }
        loop.run(in: .default, for: .zero)
      }
      let running = reports.all.value.filter { !$0.hasEnded }
      #expect(running.count == 1)
      #expect(running.first?.label == "inner" && running.first?.mode == nested)
      #expect(running.first?.depth == 2)
    }

    @Test(
      "120. Once cancel() returns the handler is not called; a threshold not above zero and a loop whose thread has exited are refused; the watch's thread ends with the loop's"
    )
    func cancelRefusalsAndLifetime() throws {
      let reports = StallReports()
      try onLoopThread { loop in
        let watch = try loop.watchStalls(longerThan: .milliseconds(20), reports.take)
        watch.cancel()
        try loop.perform { usleep(200_000) }
        loop.run(in: .default, for: .zero)
        #expect(throws: LoopError.self) { try loop.watchStalls(longerThan: .zero) { _ in } }
        let refusal = #expect(throws: LoopError.self) {
          try loop.watchStalls(longerThan: .seconds(-1)) { _ in }
        }
        #expect(refusal.map { "\($0)" }?.contains("-1") == true, "names the value")
      }
      #expect(reports.all.value.isEmpty)

      let before = threadsNamed("stall watch")
      let exited = Box<Loop?>(nil)
      try onLoopThread { loop in
        try loop.watchStalls(longerThan: .seconds(1)) { _ in }
        exited.value = loop
      }
      #expect(waitUntil(seconds: 10) { threadsNamed("stall watch") == before })
      let loop = try #require(exited.value)
      #expect(throws: LoopError.self) { try loop.watchStalls(longerThan: .seconds(1)) { _ in } }
      #expect(threadsNamed("stall watch") == before)
    }

    @Test(
      "120. A handler may cancel its own watch: the end of the callout it was told of is then not told, and the watch is let go"
    )
    func cancelledFromItsHandler() throws {
      let reports = StallReports()
      let released = Box(false)
      try onLoopThread { loop in
        let own = Box<Loop.StallWatch?>(nil)
        let marker = ReleaseMarker(released)
        own.value = try loop.watchStalls(longerThan: .milliseconds(30)) { stall in
          _ = marker
          own.value?.cancel()
          reports.take(stall)
        }
        try loop.perform { _ = reports.running.wait(seconds: 10) }
        // The handler holds its own watch: only the cancel lets the two go.
        loop.run(in: .default, for: .zero)
      }
      #expect(reports.all.value.map(\.hasEnded) == [false])
      #expect(waitUntil(seconds: 10) { released.value }, "the handler was let go")
    }

    @Test(
      "120. A handler holding its own watch, never cancelled, is let go when the loop's thread exits"
    )
    func selfHoldingWatchLetGoAtExit() throws {
      let released = Box(false)
      try onLoopThread { loop in
        let own = Box<Loop.StallWatch?>(nil)
        let marker = ReleaseMarker(released)
        own.value = try loop.watchStalls(longerThan: .seconds(60)) { _ in
          _ = marker
          _ = own.value
        }
      }
      #expect(waitUntil(seconds: 10) { released.value }, "the handler was let go")
    }

    @Test(
      "120. A watch whose handle was dropped ends with the loop's thread, which does not wait for a handler still running"
    )
    func droppedWatchDoesNotHoldTheLoopsExit() throws {
      let release = Gate()
      let reported = Gate()
      let exited = Gate()
      let thread = TestThread {
        let loop = Loop.current
        _ = try? loop.watchStalls(longerThan: .milliseconds(30)) { stall in
          guard !stall.hasEnded else { return }
          reported.open()
          _ = release.wait(seconds: 20)  // a handler that waits, past the loop's end
        }
        try? loop.perform { _ = reported.wait(seconds: 10) }
        loop.run(in: .default, for: .zero)
      }
      let joiner = TestThread {
        thread.join()
        exited.open()
      }
      let exitedInTime = exited.wait(seconds: 10)
      release.open()
      joiner.join()
      #expect(exitedInTime, "the loop's thread exited while the handler still ran")
    }

    @Test(
      "120. ProgramsOnLoops.md's stall-watch snippet logs the stall while it runs, then its end")
    func articleSnippet() throws {
      let logged = Box<[String]>([])
      let reported = Gate()
      @Sendable func log(_ line: String) {
        logged.value.append(line)
        reported.open()
      }
      try onLoopThread { loop in
        // --- ProgramsOnLoops.md: knowing the loop is stuck ---
        let watch = try loop.watchStalls(longerThan: .milliseconds(250)) { stall in
          log("\(stall)")  // timer "reload" in default (depth 1): running for 250.37 ms
        }  // later: "… ended after 1.20 s", with the same stall.callout
        // --- end ---
        try loop.assumeIsolated().addTimer(label: "reload", after: .zero) { _ in
          _ = reported.wait(seconds: 10)
        }
        loop.run(in: .default, for: .seconds(30))
        watch.cancel()
      }
      let lines = logged.value
      try #require(lines.count == 2)
      #expect(lines[0].hasPrefix("timer \"reload\" in default (depth 1): running for "))
      #expect(lines[1].hasPrefix("timer \"reload\" in default (depth 1): ended after "))
    }

    /// How many of the process's threads carry `name`.
    private func threadsNamed(_ name: String) -> Int {
      let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
      return tasks.count { task in
        let comm = try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)
        return comm?.trimmingCharacters(in: .whitespacesAndNewlines) == name
      }
    }
  }
}

/// Reports a watch made, in order, and a gate opened at each report of a running callout.
private final class StallReports: Sendable {
  let all = Box<[Loop.Stall]>([])
  let running = Gate()
  let onThread = Box<[String]>([])

  func take(_ stall: Loop.Stall) {
    let name = Thread.current.name ?? ""
    all.value.append(stall)
    onThread.value.append(name)
    if !stall.hasEnded { running.open() }
  }
}

/// Sets its flag when released: tells that a closure holding it was let go.
private final class ReleaseMarker: Sendable {
  let flag: Box<Bool>
  init(_ flag: Box<Bool>) { self.flag = flag }
  deinit { flag.value = true }
}
