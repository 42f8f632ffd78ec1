import Foundation
import Glibc
import RunLoopDemos
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  /// Each `runloop-demo` scenario, checked by what its trace shows rather than by having run.
  @Suite("Demo scenarios") struct DemoScenarios {
    typealias Kind = LoopTracer.Kind

    @Test("keepalive: empty mode returns at once; a port keeps the loop; only the flag loop stops")
    func keepAlive() throws {
      let report = try KeepAliveDemo.run()
      try #require(report.steps.count == 4)
      // 1. Nothing to wait for: the run returns without even entering the mode.
      #expect(report.steps[0].events.map(\.kind) == [.returned(.finished)])
      // 2. The port holds the thread; two messages each wake it; stop() ends the run.
      let held = report.steps[1].events
      #expect(held.sleepCauses == [[.port("work")], [.port("work")], [.wakeUp]])
      #expect(held.filter { $0.kind == .port("work") }.count == 2)
      // The loop's own last event: the stopping thread's wake-up is recorded after it sends
      // it, which may be after the loop woke and returned.
      #expect(held.last { !$0.isSent }?.kind == .returned(.stopped))
      // 3. RunLoop.run()-style: every stop is followed by a new entry.
      let unstoppable = report.steps[2].events.map(\.kind)
      #expect(unstoppable.filter { $0 == .returned(.stopped) }.count == 3)
      #expect(unstoppable.filter { $0 == .activity(.entry) }.count == 3)
      // 4. The flag loop: one stop, and no entry after it.
      let stoppable = report.steps[3].events.map(\.kind)
      #expect(stoppable.filter { $0 == .activity(.entry) }.count == 1)
      #expect(stoppable.last == .returned(.stopped))
      #expect(stoppable.contains(.blocks(count: 1)))
      #expect(report.text().contains("returned .finished"))
    }

    @Test("modes: a default-mode timer is silent in \"tracking\" until it is added to .common")
    func modes() throws {
      let report = try ModesDemo.run()
      try #require(report.steps.count == 3)
      let (idle, scrolling, common) = (
        report.steps[0].events, report.steps[1].events, report.steps[2].events
      )
      #expect(fires(of: "clock", in: idle, mode: .default) >= 1)
      #expect(fires(of: "clock", in: scrolling, mode: ModesDemo.tracking) == 0)
      #expect(fires(of: "touch", in: scrolling, mode: ModesDemo.tracking) >= 1)
      #expect(fires(of: "clock", in: common, mode: ModesDemo.tracking) >= 1)
      #expect(scrolling.allSatisfy { $0.mode == ModesDemo.tracking })
      #expect(report.text().contains("\"clock\" fired 0 times"))
    }

    @Test("step: four passes, the same text on every run, the source run on the pass after")
    func step() throws {
      let first = try StepDemo.run()
      let second = try StepDemo.run()
      #expect(first.text() == second.text(), "virtual time: byte-identical output")
      try #require(first.steps.count == 4)
      let kinds = first.steps.map { $0.events.map(\.kind) }
      #expect(kinds[0].contains(.slept(wokenBy: [.timer])))
      #expect(kinds[1].contains(.manualSource("button")), "signalled in pass 1, run in pass 2")
      #expect(!kinds[1].contains { if case .slept = $0 { true } else { false } })
      #expect(kinds[2].contains(.timer("tick", lateness: .zero)))
      #expect(first.text().contains("slept 100.00 ms, woken by timer"))
    }

    @Test(
      "106. retry: runTask drives a client's timeouts and backoff in virtual time, the same text on every run"
    )
    func retry() throws {
      let first = try RetryDemo.run()
      let second = try RetryDemo.run()
      #expect(first.text() == second.text(), "virtual time: byte-identical output")
      let step = try #require(first.steps.first)
      let timers = (step.shown ?? []).compactMap { event -> String? in
        if case .timer(let label, _) = event.kind { return label }
        return nil
      }
      #expect(timers.count == 15)
      #expect(timers.filter { $0.hasPrefix("timeout of attempt") }.count == 7)
      #expect(timers.last == "reply to attempt 8")
      #expect(first.text().contains("337.00 s."))
      #expect(first.text().contains("the clock ends at 342.00 s"))
    }

    @Test("observers: the observer is told exactly the activities the trace shows, in order")
    func observers() throws {
      let (report, told) = try ObserversDemo.run()
      let events = try #require(report.steps.first?.events)
      let activities = events.compactMap { event -> String? in
        if case .activity(let activity) = event.kind { return "\(activity)" }
        return nil
      }
      #expect(told == activities)
      let pass = ["beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting"]
      #expect(told == ["entry"] + pass + pass + ["exit"])
      // Each activity is followed by the observer's callout.
      #expect(
        events.map { $0.kind.withoutLateness } == [
          .activity(.entry), .observer(.entry, order: 0),
          .activity(.beforeTimers), .observer(.beforeTimers, order: 0),
          .activity(.beforeSources), .observer(.beforeSources, order: 0), .blocks(count: 1),
          .activity(.beforeWaiting), .observer(.beforeWaiting, order: 0),
          .slept(wokenBy: [.timer]),
          .activity(.afterWaiting), .observer(.afterWaiting, order: 0),
          .timer("tick", lateness: .zero),
          .activity(.beforeTimers), .observer(.beforeTimers, order: 0),
          .activity(.beforeSources), .observer(.beforeSources, order: 0),
          .activity(.beforeWaiting), .observer(.beforeWaiting, order: 0),
          .slept(wokenBy: [.timer]),
          .activity(.afterWaiting), .observer(.afterWaiting, order: 0),
          .timer("tick", lateness: .zero),
          .activity(.exit), .observer(.exit, order: 0), .returned(.finished),
        ])
    }

    @Test(
      "sources: the signalled source runs only after the pipe wakes the loop; signalAndWake at once"
    )
    func sources() throws {
      let report = try SourcesDemo.run()
      let events = try #require(report.steps.first?.events)
      let kinds = events.map(\.kind)
      let firstManual = try #require(kinds.firstIndex(of: .manualSource("manual")))
      let pipeEvent = try #require(
        kinds.firstIndex {
          if case .descriptor("pipe", _, _) = $0 { return true }
          return false
        })
      // Nothing ran until the pipe woke the loop; the manual source ran in the pass after.
      #expect(pipeEvent < firstManual)
      // The one sleep before it was ended by the pipe, nothing else.
      let before = Array(events[..<pipeEvent]).sleepCauses
      #expect(before.count == 1 && before.first?.count == 1)
      if case .descriptor("pipe", _)? = before.first?.first {
      } else {
        Issue.record("the first sleep was ended by \(before)")
      }
      // signalAndWake: woken through the wake-up port, performed straight after.
      let secondManual = try #require(
        kinds.indices.last { kinds[$0] == .manualSource("manual") })
      #expect(secondManual > firstManual)
      #expect(Array(events[firstManual..<secondManual]).sleepCauses == [[.wakeUp]])
      #expect(report.text().contains("the source had run 0 times and the loop was still asleep"))
    }

    @Test(
      "search: each query completed, dropped or debounced; one search at a time, on one thread"
    )
    func search() throws {
      let outcome = try SearchDemo.run(typing: ["run", "loop"])
      #expect(outcome.callbacksOffThread == 0)
      let queries = ["r", "ru", "run", "runl", "runlo", "runloo", "runloop"]
      try #require(outcome.fates.map(\.query) == queries)
      // Which keys were debounced depends on how fast the typist's keys landed, which a
      // loaded machine decides: only what holds however the keys were spaced is checked.
      let log = outcome.log
      for (index, query) in queries.enumerated() {
        let fates = log.compactMap { event -> SearchDemo.Fate? in
          if case .finished(query, let fate) = event.kind { return fate }
          return nil
        }
        // Exactly one fate per query, and the one the outcome lists.
        #expect(fates.count == 1, "\(query): \(fates)")
        #expect(fates.first == outcome.fates[index].fate)
        let starts = log.filter { $0.kind == .started(query) }.count
        let later = queries[(index + 1)...]
        switch fates.first {
        case .debounced(let newer)?:
          // Never started, for a later keystroke.
          #expect(starts == 0, "\(query) was debounced after it started")
          #expect(later.contains(newer))
        case .superseded(let slices, let newer)?:
          // Started, then dropped for a later keystroke before it could finish.
          #expect(starts == 1)
          #expect(later.contains(newer))
          #expect(slices < outcome.slicesPerSearch)
        case .completed(_, _, let slices)?:
          #expect(starts == 1)
          #expect(slices == outcome.slicesPerSearch)
        case nil:
          break
        }
      }
      // One search at a time, each for the newest key, started by the debouncer no sooner
      // than the delay after the last keystroke before it (instants taken on the thread).
      var running: String?
      var lastKey: (query: String, instant: LoopClock.Instant)?
      for event in log {
        switch event.kind {
        case .keystroke(let query):
          lastKey = (query, event.instant)
        case .started(let query):
          #expect(running == nil, "\(query) started while \(running ?? "") ran")
          running = query
          #expect(lastKey?.query == query)
          if let lastKey {
            #expect(lastKey.instant.duration(to: event.instant) >= SearchDemo.debounceDelay)
          }
        case .finished(let query, .debounced):
          #expect(running != query)
        case .finished(let query, _):
          #expect(running == query)
          running = nil
        }
      }
      #expect(running == nil)
      // The last query completed, and its sliced search agrees with a search in one go.
      guard case .completed(let best, let matches, _) = outcome.fates.last?.fate else {
        Issue.record("the last query did not complete: \(String(describing: outcome.fates.last))")
        return
      }
      #expect(best == FuzzyMatcher.best("runloop", in: FuzzyMatcher.corpus, limit: 5))
      #expect(matches > 0)
      for match in best {
        // The highlighted characters spell the query, and the text shows them bracketed.
        let letters = match.ranges.flatMap { range in
          range.map { Array(match.name)[$0] }
        }
        #expect(String(letters).lowercased() == "runloop")
        #expect(outcome.report.text().contains(match.highlighted))
      }
      // The trace shows keystrokes arriving through the port and the matcher's slices.
      let events = try #require(outcome.report.steps.first?.events)
      #expect(events.filter { $0.kind == .port("keystrokes") }.count >= 1)
      #expect(events.sleepCauses.contains { $0.contains(.port("keystrokes")) })
      #expect(
        events.filter { $0.kind == .manualSource("matcher") }.count >= outcome.slicesPerSearch)
    }

    @Test("Fuzzy matching prefers few runs that start words, and highlights them")
    func fuzzyMatching() {
      let query = Array("runloop".utf8)
      let match = FuzzyMatcher.match(query, in: .init("PortRunLoop"))
      #expect(match?.highlighted == "Port[RunLoop]")
      #expect(FuzzyMatcher.match(query, in: .init("RunPoll")) == nil)
      let split = FuzzyMatcher.match(Array("rl".utf8), in: .init("RunLoop"))
      #expect(split?.ranges == [0..<1, 3..<4])
    }

    @Test("network: a loopback echo served by descriptor sources on one resident thread")
    func network() throws {
      let openBefore = openDescriptorCount()
      let outcome = try NetworkDemo.run()
      #expect(outcome.serverReceived == NetworkDemo.messages)
      #expect(outcome.clientReceived == NetworkDemo.messages)
      #expect(outcome.callbacksOffThread == 0)
      #expect(outcome.descriptors.count == 3)
      #expect(outcome.descriptors.allSatisfy { !isOpen($0) })
      #expect(openDescriptorCount() == openBefore)
      let events = try #require(outcome.report.steps.first?.events)
      let handled = events.compactMap { event -> (String, DescriptorSource.Events)? in
        if case .descriptor(let name, _, let reported) = event.kind { return (name, reported) }
        return nil
      }
      let listener = try #require(handled.firstIndex { $0.0 == "listener" })
      let firstServer = try #require(handled.firstIndex { $0.0 == "server" })
      #expect(listener < firstServer)
      #expect(handled.first { $0.0 == "client" }?.1.contains(.writable) == true)
      // Three messages each way, then the two ends of stream.
      #expect(handled.filter { $0.0 == "server" }.count == NetworkDemo.messages.count + 1)
      #expect(handled.filter { $0.0 == "client" }.count == NetworkDemo.messages.count + 2)
      // Each end armed one idle timer, which every read pushed back (each end reads every
      // message at least once), which never fired, and which its connection invalidated.
      let idle = outcome.idleTimers
      #expect(idle.armed == 2)
      #expect(idle.fired == 0)
      #expect(idle.moved >= 2 * NetworkDemo.messages.count)
      #expect(idle.stillValid == 0)
      // No timer fired at all: the idle timers are the only ones on this loop.
      #expect(
        !events.contains {
          if case .timer = $0.kind { return true }
          return false
        })
      // The block that opened the sockets woke the loop; after that only sockets did, until
      // perhaps the block that detached the tracer at the end.
      var causes = events.sleepCauses
      #expect(causes.first == [.wakeUp])
      if causes.last == [.wakeUp] { causes.removeLast() }
      #expect(
        causes.dropFirst().joined().allSatisfy { cause in
          if case .descriptor = cause { return true }
          return false
        })
    }

    @Test("Every scenario is listed, renders text with its explanation and a well-formed SVG")
    func everyScenarioRenders() throws {
      #expect(
        DemoScenario.all.map(\.name) == [
          "keepalive", "modes", "observers", "step", "retry", "sources", "search", "network",
          "concurrency", "signals",
        ])
      // Scenarios that run Loop.main are rendered by their XCTest case, on the main thread.
      for scenario in DemoScenario.all where !scenario.needsMainThread {
        let report = try scenario.run()
        let text = report.text()
        #expect(text.hasPrefix("== \(scenario.name): "))
        #expect(text.contains("Why:"))
        #expect(text.contains("time ms"))
        #expect(report.explanation.count > 200)
        let svg = SVGSummary(report.svg())
        #expect(svg.error == nil, "\(scenario.name)")
        #expect(svg.root == "svg")
        #expect(svg.texts.contains { $0.hasPrefix("runloop-demo \(scenario.name)") })
      }
    }

    private func fires(of name: String, in events: [LoopTracer.Event], mode: Loop.Mode) -> Int {
      events.filter {
        if case .timer(name, _) = $0.kind { return $0.mode == mode }
        return false
      }.count
    }
  }
}
