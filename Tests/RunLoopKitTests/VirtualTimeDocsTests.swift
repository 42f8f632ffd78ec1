import Foundation
import Glibc
import Testing

@testable import RunLoopKit

// The examples of the DocC article "Testing code that runs on a loop" and of the README's
// virtual-time section, as they are printed there.

// --- TestingCodeOnALoop.md: a request with a timeout ---
/// Sends a request and gives up if no reply comes within `timeout`.
final class Request {
  private(set) var outcome: String?
  private var timer: ScheduledBlock?

  func send(timeout: Duration) throws {
    timer = try Loop.current.assumeIsolated().perform(after: timeout) {
      self.outcome = "timed out"
    }
  }

  func replyArrived() {
    guard outcome == nil else { return }
    timer?.cancel()
    outcome = "replied"
  }
}
// --- end ---

extension RunLoopKitTests {
  @Suite("Virtual time: the documentation's examples") struct VirtualTimeDocs {
    @Test("Article: the debouncer fires once, 300 ms after the last input")
    func debouncerTest() throws {
      // --- TestingCodeOnALoop.md: testing the debouncer ---
      let virtual = VirtualLoop()
      var saved = 0
      let debouncer = Debouncer(delay: .milliseconds(300)) { saved += 1 }

      try virtual.asCurrent { try debouncer.input() }  // the loop is Loop.current in there
      virtual.advance(by: .milliseconds(200))
      try virtual.asCurrent { try debouncer.input() }  // starts the 300 ms again
      virtual.advance(by: .milliseconds(299))
      #expect(saved == 0)
      virtual.advance(by: .milliseconds(1))
      #expect(saved == 1)
      // --- end ---
    }

    @Test("Article: a request times out after 5 s, and not when the reply comes first")
    func timeoutTest() throws {
      // --- TestingCodeOnALoop.md: testing a timeout ---
      let virtual = VirtualLoop()
      let silent = Request()
      let answered = Request()
      try virtual.asCurrent {
        try silent.send(timeout: .seconds(5))
        try answered.send(timeout: .seconds(5))
        // The reply comes 2 s later, from the loop itself (a socket's handler, in real code).
        try virtual.loop.assumeIsolated().perform(after: .seconds(2)) { answered.replyArrived() }
      }
      virtual.advance(by: .seconds(5))
      #expect(silent.outcome == "timed out")
      #expect(answered.outcome == "replied")
      // --- end ---
    }

    @Test("Article: with auto-advance an unmodified program runs an hour of heartbeats at once")
    func autoAdvanceTest() throws {
      // --- TestingCodeOnALoop.md: auto-advance ---
      let virtual = VirtualLoop(autoAdvance: true)
      var beats = 0
      try virtual.asCurrent {
        // The program as it is: a heartbeat every 30 s, and a loop run for an hour.
        let loop = Loop.current
        try loop.assumeIsolated().addTimer(after: .seconds(30), repeating: .seconds(30)) { _ in
          beats += 1
        }
        loop.run(in: .default, for: .seconds(3600))
      }
      #expect(beats == 120)
      #expect(virtual.now == VirtualLoop.defaultStart.advanced(by: .seconds(3600)))
      // --- end ---
    }

    @Test("Article: runTask gives the backoff client's exact attempt times")
    func runTaskBackoffArticle() throws {
      // --- TestingCodeOnALoop.md: testing async code ---
      let virtual = VirtualLoop()
      let times = try virtual.runTask {
        let client = BackoffClient(on: Loop.current)
        _ = try await client.fetch(from: eighthAttemptAnswers)
        return client.attempts.map { VirtualLoop.defaultStart.duration(to: $0) }
      }
      #expect(times == [0, 31, 63, 97, 135, 181, 243, 337].map { .seconds($0) })
      #expect(virtual.now == VirtualLoop.defaultStart.advanced(by: .seconds(342)))
      // --- end ---
    }

    @Test("Article: a debouncer typed at in runTask saves 300 ms after each pause")
    func runTaskDebouncerArticle() throws {
      // --- TestingCodeOnALoop.md: a debouncer in runTask ---
      let virtual = VirtualLoop()
      let saves = try virtual.runTask { () -> [Duration] in
        let loop = Loop.current
        var saves: [Duration] = []
        let debouncer = Debouncer(delay: .milliseconds(300)) {
          saves.append(VirtualLoop.defaultStart.duration(to: loop.now))
        }
        try debouncer.input()  // at 0
        try await loop.sleep(for: .milliseconds(200))
        try debouncer.input()  // at 200 ms: starts the 300 ms again
        try await loop.sleep(for: .seconds(1))
        try debouncer.input()  // at 1.2 s
        try await loop.sleep(for: .seconds(1))
        return saves
      }
      #expect(saves == [.milliseconds(500), .milliseconds(1500)])
      // --- end ---
    }

    @Test("Every Swift snippet of Testing code that runs on a loop appears line for line in a test")
    func articleSnippetsAreTests() throws {
      let article = try PackageFiles.text(
        "Sources/RunLoopKit/RunLoopKit.docc/TestingCodeOnALoop.md")
      // The swift-clocks comparison is another library's code, not compiled here.
      let snippets = ReadmeSnippets.swiftSnippets(in: article).filter {
        $0.first != "// swift-clocks, for comparison"
      }
      #expect(snippets.count >= 10, "the article's Swift snippets were not found")
      for snippet in try ReadmeSnippets.notInTests(snippets) {
        Issue.record("no test holds the article's snippet that starts \"\(snippet.first ?? "")\"")
      }
    }

    @Test("Article: step() reports one pass")
    func stepTest() throws {
      // --- TestingCodeOnALoop.md: one pass at a time ---
      let virtual = VirtualLoop()
      let view = virtual.loop.assumeIsolated()
      try view.addTimer(label: "tick", after: .milliseconds(100)) { _ in }
      try view.perform {}

      let pass = virtual.step()
      #expect(pass.callouts == [.blocks(count: 1), .timer("tick", lateness: .zero)])
      #expect(pass.wokenBy == [.timer])
      #expect(virtual.now == VirtualLoop.defaultStart.advanced(by: .milliseconds(100)))
      print(pass)  // the pass as a timeline, the same on every run
      // --- end ---
    }
  }
}
