import CRunLoopShims
import Glibc
import Testing

@testable import RunLoopKit

// The examples of code that lives on a loop in the README (Connection) and the DocC article
// on thread-bound state (Connection, Debouncer): plain classes, no Sendable conformance,
// no lock, whose callbacks capture `self`. This file compiling in Swift 6 mode is half of
// the tests below.

// --- README and ThreadBoundState.md: code on a loop ---
final class Connection {
  var ticks = 0

  func start() throws {
    try Loop.current.assumeIsolated().addTimer(
      after: .milliseconds(10), repeating: .milliseconds(10)
    ) { timer in
      self.ticks += 1
      if self.ticks == 3 { timer.invalidate() }
    }
  }
}

final class Debouncer {
  let delay: Duration
  let action: () -> Void  // a plain stored closure: neither @Sendable nor sending
  private var pending: ScheduledBlock?

  init(delay: Duration, action: @escaping () -> Void) {
    self.delay = delay
    self.action = action
  }

  func input() throws {
    pending?.cancel()
    pending = try Loop.current.assumeIsolated().perform(after: delay) { self.action() }
  }
}
// --- end ---

/// Reads a pipe into its own buffer from a descriptor source it owns.
final class PipeReader {
  let fd: Int32
  var received: [UInt8] = []
  var source: DescriptorSource?

  init(fd: Int32) { self.fd = fd }

  func start() throws {
    source = try Loop.current.assumeIsolated().addSource(fileDescriptor: fd) { source, events in
      // After a hang-up the source is told no more: read to the end now.
      while self.readSome() > 0 && events.contains(.hangUp) {}
      if events.contains(.hangUp) { source.invalidate() }  // releases this closure and `self`
    }
  }

  private func readSome() -> Int {
    var buffer = [UInt8](repeating: 0, count: 64)
    let count = read(fd, &buffer, buffer.count)
    if count > 0 { received += buffer.prefix(count) }
    return count
  }
}

/// Counts the passes of its loop, and what woke each.
final class PassCounter {
  var beforeWaiting = 0
  var afterWaiting = 0

  func start() throws {
    try Loop.current.assumeIsolated().addObserver([.beforeWaiting, .afterWaiting]) {
      _, activity in
      if activity == .beforeWaiting { self.beforeWaiting += 1 } else { self.afterWaiting += 1 }
    }
  }
}

/// A value whose release a test can watch (through a weak reference).
final class Tracked {}

extension RunLoopKitTests {
  @Suite("Code that lives on a loop") struct CodeOnALoop {
    @Test(
      "73. A connection on its loop's thread arms its own timer with a closure that mutates self")
    func test_73_connectionTimer() throws {
      let (ticks, result) = try onLoopThread { loop -> (Int, Loop.RunResult) in
        let connection = Connection()
        try connection.start()
        // The timer is the mode's only item: invalid after the third tick, the run finishes.
        let result = loop.run(in: .default, for: .seconds(10))
        return (connection.ticks, result)
      }
      #expect(ticks == 3)
      #expect(result == .finished)
    }

    @Test(
      "73. A debouncer with a stored non-Sendable action re-arms perform(after:) on each input and runs once, after the last"
    )
    func test_73_debouncer() throws {
      // Virtual time: the subject is the debouncing, so the delays are exact.
      let (runs, quiet, inputs) = try onVirtualLoop { _, loop -> (Int, Duration?, Int) in
        var runs = 0
        var inputs = 0
        var lastInput = loop.now
        var quiet: Duration?
        let debouncer = Debouncer(delay: .milliseconds(30)) {
          runs += 1
          quiet = lastInput.duration(to: loop.now)
        }
        // Four inputs 10 ms apart, each well inside the delay, fed by a timer on the loop.
        let view = loop.assumeIsolated()
        try view.addTimer(after: .zero, repeating: .milliseconds(10)) { timer in
          lastInput = loop.now
          inputs += 1
          try? debouncer.input()
          if inputs == 4 { timer.invalidate() }
        }
        // Long past the last input's delay: a cancelled run that still ran would show here.
        // (An empty mode's run returns at once and takes no virtual time: stop there.)
        let end = loop.now.advanced(by: .milliseconds(200))
        while loop.now < end, loop.run(in: .default, until: end) != .finished {}
        return (runs, quiet, inputs)
      }
      #expect(inputs == 4)
      #expect(runs == 1)
      #expect(quiet == .milliseconds(30))
    }

    @Test("73. A descriptor source's handler mutates the object that owns it")
    func test_73_descriptorSourceOwner() throws {
      let pipe = makePipe()
      defer { close(pipe.read) }
      let writer = TestThread {
        for word in ["run ", "loop"] { _ = write(pipe.write, word, word.utf8.count) }
        close(pipe.write)
      }
      let (text, result) = try onLoopThread { loop -> (String, Loop.RunResult) in
        let reader = PipeReader(fd: pipe.read)
        try reader.start()
        // The mode's only item, until end of stream invalidates it: the run then finishes.
        let result = loop.run(in: .default, for: .seconds(10))
        return (String(decoding: reader.received, as: UTF8.self), result)
      }
      writer.join()
      #expect(text == "run loop")
      #expect(result == .finished)
    }

    @Test("73. An observer counts the loop's passes into self, and a manual source captures self")
    func test_73_observerAndManualSource() throws {
      let counts = try onLoopThread { loop -> [Int] in
        let counter = PassCounter()
        try counter.start()
        var performed = 0
        let seen = Counter()  // what the poking thread may read
        let view = loop.assumeIsolated()
        let source = try view.addManualSource(label: "poke") {
          performed += 1
          seen.increment()
        }
        // Two pokes from another thread, each once the loop sleeps after the last one.
        let poker = TestThread {
          for poke in 0..<2 {
            guard waitUntil({ seen.value == poke && loop.isWaiting }) else { return }
            source.signalAndWake()
          }
        }
        while performed < 2,
          loop.run(in: .default, for: .seconds(10), returnAfterSourceHandled: true)
            == .handledSource
        {}
        poker.join()
        source.invalidate()
        return [performed, counter.beforeWaiting, counter.afterWaiting]
      }
      #expect(counts == [2, 2, 2])
    }

    @Test("73. A view kept by an object keeps working for closures added later on that thread")
    func test_73_viewKeptForLater() throws {
      final class Poller {
        let loop: IsolatedLoop
        var log: [String] = []
        init(loop: IsolatedLoop) { self.loop = loop }

        func start() throws {
          try loop.perform { try? self.second() }
        }

        func second() throws {
          log.append("block")
          try loop.addTimer(after: .zero) { _ in
            self.log.append("timer")
            try? self.loop.perform(in: .default) { self.log.append("last block") }
          }
        }
      }
      let log = try onLoopThread { loop -> [String] in
        let poller = Poller(loop: loop.assumeIsolated())
        try poller.start()
        loop.run(in: .default, for: .seconds(10))  // finishes once nothing is left
        return poller.log
      }
      #expect(log == ["block", "timer", "last block"])
    }

    @Test(
      "73. The view is not Sendable, and assumeIsolated() is refused in async code, at compile time"
    )
    func test_73_compileTimeChecks() throws {
      let (status, output) = try typecheckClient(
        """
        import RunLoopKit
        func leak(_ view: IsolatedLoop) -> any Sendable { view }
        func fromAsync() async { _ = Loop.current.assumeIsolated() }
        """)
      #expect(status != 0, "the client compiled: \(output)")
      #expect(output.contains("conformance of 'IsolatedLoop' to 'Sendable' is unavailable"))
      #expect(output.contains("'assumeIsolated' is unavailable from asynchronous contexts"))
      #expect(output.contains("may resume on another thread"), "the message says why")
    }

    @Test(
      "74. loop.assumeIsolated() off the loop's thread traps with a message naming both threads")
    func test_74_offThreadTraps() async {
      let result = await #expect(
        processExitsWith: .failure, observing: [\.standardErrorContent]
      ) {
        // In a synchronous function, as code on a loop calls it (it is noasync).
        func assumeOffThread() throws {
          let thread = try ResidentThread(name: "owner")
          _ = thread.loop.assumeIsolated()
        }
        try assumeOffThread()
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(
        message.contains("Loop.assumeIsolated() must run on the loop of thread"), "\(message)")
      #expect(message.contains("\"owner\""))
      #expect(message.contains("but ran on thread"))
      #expect(message.contains("loop.perform"), "the message says what to do instead")
    }

    @Test("74. thread.assumeIsolated() off the resident thread traps, naming both threads")
    func test_74_residentOffThreadTraps() async {
      let result = await #expect(
        processExitsWith: .failure, observing: [\.standardErrorContent]
      ) {
        func assumeOffThread() throws {
          let thread = try ResidentThread(name: "worker")
          _ = thread.assumeIsolated()
        }
        try assumeOffThread()
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(
        message.contains("ResidentThread(\"worker\").assumeIsolated() must run on the loop of"),
        "\(message)")
      #expect(message.contains("but ran on thread"))
      #expect(message.contains("thread.perform"))
    }

    @Test("74. A view carried off its thread by a sending hand-over traps at its next call")
    func test_74_smuggledViewTraps() async {
      let result = await #expect(
        processExitsWith: .failure, observing: [\.standardErrorContent]
      ) {
        let owner = try ResidentThread(name: "owner")
        let other = try ResidentThread(name: "other")
        let done = Gate()
        try owner.perform {
          let view = Loop.current.assumeIsolated()
          // The compiler allows this (`sending`: nothing here uses the view afterwards), so
          // the view's own check is what stops it.
          try? other.perform {
            try? view.perform {}
            done.open()
          }
        }
        done.wait()
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(
        message.contains("IsolatedLoop.perform(_:) must run on the loop of thread"), "\(message)")
      #expect(message.contains("\"owner\"") && message.contains("\"other\""))
      #expect(message.contains("must stay on the thread that made it"))
    }

    @Test(
      "74. Isolated calls keep binding and modes: items belong to this loop, and run only in the modes given"
    )
    func test_74_bindingAndModes() throws {
      let other = try ResidentThread(name: "other")
      let (log, refused) = try onLoopThread { loop -> ([String], Bool) in
        var log: [String] = []
        let view = loop.assumeIsolated()
        try loop.addCommonMode("tracking")
        try view.perform(in: "modal") { log.append("modal block") }
        try view.perform(in: ["tracking", "modal"]) { log.append("tracking+modal block") }
        try view.perform { log.append("common block") }
        try view.perform(after: .zero, in: ["modal"]) { log.append("modal delayed") }
        try view.addTimer(after: .zero, to: .common) { _ in log.append("common timer") }
        let defaultOnly = try view.addTimer(after: .zero) { _ in log.append("default timer") }
        // The timer is bound to this loop: another loop refuses it, as for any timer.
        var refused = false
        do { try other.loop.add(defaultOnly, to: .default) } catch let error as LoopError {
          if case .boundToAnotherLoop = error { refused = true }
        }
        loop.run(in: "tracking", for: .zero)
        log.append("--")
        loop.run(in: "modal", for: .zero)
        log.append("--")
        loop.run(in: .default, for: .zero)
        return (log, refused)
      }
      #expect(refused)
      #expect(
        log == [
          "tracking+modal block", "common block", "common timer", "--",
          "modal block", "modal delayed", "--", "default timer",
        ])
    }

    @Test(
      "74. Isolated calls keep the errors: a bad fd names itself and its errno and leaves nothing, bad modes and intervals throw"
    )
    func test_74_errors() throws {
      let outcome = try onLoopThread { loop -> [String] in
        var outcome: [String] = []
        let view = loop.assumeIsolated()
        let watch = WeakWatch()
        do {
          let tracked = Tracked()
          watch.watch(tracked)
          _ = try view.addSource(fileDescriptor: -1) { _, _ in _ = tracked }
        } catch {
          outcome.append("\(error)")
        }
        outcome.append(watch.isReleased ? "released" : "kept")
        // Nothing half-registered: the mode is still empty.
        outcome.append(loop.run(in: .default, for: .zero) == .finished ? "empty" : "not empty")
        do { try view.perform(in: [Loop.Mode]()) {} } catch { outcome.append("\(error)") }
        do { try view.perform(in: "") {} } catch { outcome.append("\(error)") }
        do { try view.addTimer(after: .zero, repeating: .zero) { _ in } } catch {
          outcome.append("\(error)")
        }
        return outcome
      }
      #expect(outcome.count == 6, "\(outcome)")
      #expect(outcome[0].contains("-1") && outcome[0].contains("EBADF"), "\(outcome[0])")
      #expect(Array(outcome[1...2]) == ["released", "empty"])
      #expect(outcome[3].contains("at least one mode"), "\(outcome[3])")
      #expect(outcome[4].contains("mode name \"\" cannot be used"), "\(outcome[4])")
      #expect(outcome[5].contains("must be greater than zero"), "\(outcome[5])")
    }

    @Test(
      "74. Through thread.assumeIsolated(), blocks are refused once stop() was called, as thread.perform's are; the loop's own view still accepts them"
    )
    func test_74_stoppedThreadRefuses() throws {
      let thread = try ResidentThread(name: "stopping")
      let ran = Recorder()
      let refusal = try thread.performAndWait { () -> String in
        thread.stop()
        var refusal = "accepted"
        do { try thread.assumeIsolated().perform { ran.log("thread view") } } catch {
          refusal = "\(error)"
        }
        // The loop itself accepts work until the thread exits, and runs it first.
        try? thread.loop.assumeIsolated().perform { ran.log("loop view") }
        return refusal
      }
      try thread.join()
      #expect(refusal.contains("stopped"), "\(refusal)")
      #expect(ran.all == ["loop view"])
    }

    @Test(
      "74. Isolated calls keep CF order: blocks in the order posted with Loop.perform's, observers and sources by order"
    )
    func test_74_cfOrder() throws {
      let log = Recorder()  // Sendable, so Loop.perform's blocks may share it too
      try onLoopThread { loop in
        let view = loop.assumeIsolated()
        try loop.perform { log.log("loop 1") }
        try view.perform { log.log("view 2") }
        try loop.perform { log.log("loop 3") }
        for (name, order) in [("observer 5", 5), ("observer 1a", 1), ("observer 1b", 1)] {
          try view.addObserver(.beforeSources, order: order) { _, _ in log.log(name) }
        }
        let late = try view.addManualSource(label: "2", order: 2) { log.log("source 2") }
        let early = try view.addManualSource(label: "1", order: 1) { log.log("source 1") }
        late.signal()
        early.signal()
        loop.run(in: .default, for: .zero)
      }
      #expect(
        log.all == [
          "observer 1a", "observer 1b", "observer 5", "loop 1", "view 2", "loop 3",
          "source 1", "source 2",
        ])
    }

    @Test("74. Invalidating an item armed through the view releases its closure")
    func test_74_invalidateReleases() throws {
      let released = try onLoopThread { loop -> [Bool] in
        let view = loop.assumeIsolated()
        let pipe = makePipe()
        defer {
          close(pipe.read)
          close(pipe.write)
        }
        var released: [Bool] = []
        func check(_ arm: (Tracked) throws -> () -> Void) rethrows {
          let watch = WeakWatch()
          let cancel = try {
            let tracked = Tracked()
            watch.watch(tracked)
            return try arm(tracked)
          }()
          released.append(watch.isReleased)  // held while armed
          cancel()
          released.append(watch.isReleased)
        }
        try check { tracked in
          let timer = try view.addTimer(after: .seconds(60)) { _ in _ = tracked }
          return timer.invalidate
        }
        try check { tracked in
          let source = try view.addSource(fileDescriptor: pipe.read) { _, _ in _ = tracked }
          return source.invalidate
        }
        try check { tracked in
          let observer = try view.addObserver(.all) { _, _ in _ = tracked }
          return observer.invalidate
        }
        try check { tracked in
          let source = try view.addManualSource { _ = tracked }
          return source.invalidate
        }
        try check { tracked in
          let scheduled = try view.perform(after: .seconds(60)) { _ = tracked }
          return { _ = scheduled.cancel() }
        }
        return released
      }
      #expect(released == Array(repeating: [false, true], count: 5).flatMap { $0 })
    }

    @Test(
      "74. Code isolated to an actor whose executor is not this loop's traps at assumeIsolated(), naming the actor"
    )
    func test_74_foreignActorTraps() async {
      let result = await #expect(
        processExitsWith: .failure, observing: [\.standardErrorContent]
      ) {
        actor Floating {
          func arm() { _ = Loop.current.assumeIsolated() }
        }
        await Floating().arm()
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(
        message.contains("Loop.assumeIsolated() was called from code isolated to Floating"),
        "\(message)")
      #expect(message.contains("would run on this loop's thread outside it"))
      #expect(message.contains("loop.executor.asUnownedSerialExecutor()"))
    }

    @Test(
      "74. An item armed through the view and invalidated from another thread lets go of its closure on the loop's thread"
    )
    func test_74_releaseOnLoopThread() throws {
      let thread = try ResidentThread(name: "owner")
      let pipe = makePipe()
      defer {
        close(pipe.read)
        close(pipe.write)
      }
      let released = Recorder()
      // Made on the thread; each closure holds the only reference to its ReleaseReporter.
      let items = try thread.performAndWait { () throws -> [@Sendable () -> Void] in
        let view = thread.assumeIsolated()
        func reporter(_ name: String) -> ReleaseReporter {
          ReleaseReporter(name, on: thread, into: released)
        }
        let (timer, source) = (reporter("timer"), reporter("source"))
        let (observer, manual) = (reporter("observer"), reporter("manual source"))
        let (port, delayed) = (reporter("port"), reporter("delayed block"))
        let armed = (
          try view.addTimer(after: .seconds(60)) { _ in _ = timer },
          try view.addSource(fileDescriptor: pipe.read) { _, _ in _ = source },
          try view.addObserver(.exit) { _, _ in _ = observer },
          try view.addManualSource { _ = manual },
          try view.addPort(of: Int.self) { _ in _ = port },
          try view.perform(after: .seconds(60)) { _ = delayed }
        )
        return [
          armed.0.invalidate, armed.1.invalidate, armed.2.invalidate, armed.3.invalidate,
          { _ = armed.4.invalidate() }, { _ = armed.5.cancel() },
        ]
      }
      for invalidate in items { invalidate() }  // on this thread, not the loop's
      #expect(waitUntil { released.all.count == 6 })
      #expect(
        Set(released.all) == [
          "timer on its thread", "source on its thread", "observer on its thread",
          "manual source on its thread", "port on its thread", "delayed block on its thread",
        ])
    }

    @Test(
      "74. Every call checks the caller's actor: a view used from code isolated to an actor on another executor traps"
    )
    func test_74_perCallIsolationTraps() async {
      let result = await #expect(
        processExitsWith: .failure, observing: [\.standardErrorContent]
      ) {
        actor Elsewhere {}
        func useView() throws {
          let thread = try ResidentThread(name: "owner")
          try thread.performAndWait {
            // What code isolated to that actor would pass as #isolation.
            try thread.assumeIsolated().perform(isolation: Elsewhere()) {}
          }
        }
        try useView()
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(
        message.contains("perform(_:) was called from code isolated to Elsewhere"), "\(message)")
      #expect(message.contains("\"owner\""))
    }

    @Test(
      "74. The main actor counts as Loop.main's only: main-actor code arming another loop's callbacks traps"
    )
    func test_74_mainActorElsewhereTraps() async {
      let result = await #expect(
        processExitsWith: .failure, observing: [\.standardErrorContent]
      ) {
        func useView() throws {
          let thread = try ResidentThread(name: "owner")
          try thread.performAndWait {
            _ = try thread.assumeIsolated().addTimer(after: .zero, isolation: MainActor.shared) {
              _ in
            }
          }
        }
        try useView()
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(message.contains("called from code isolated to MainActor"), "\(message)")
    }

    @Test(
      "74. The rest of the view: perform(at:), addTimer(fireAt:) and addPort, and a resident thread's perform(after:) refused after stop()"
    )
    func test_74_restOfTheView() throws {
      let log = try onLoopThread { loop -> [String] in
        var log: [String] = []
        let view = loop.assumeIsolated()
        let start = LoopClock.Instant.now
        try view.perform(at: start.advanced(by: .milliseconds(20))) {
          log.append(
            LoopClock.Instant.now >= start.advanced(by: .milliseconds(20)) ? "at" : "early")
          loop.stop()  // the port keeps the mode alive: the last item ends the run
        }
        try view.addTimer(fireAt: start.advanced(by: .milliseconds(10))) { _ in
          log.append(
            LoopClock.Instant.now >= start.advanced(by: .milliseconds(10)) ? "fireAt" : "early")
        }
        let port = try view.addPort(of: String.self, label: "words") { word in
          log.append("port \(word)")
        }
        try port.send("one")
        try port.send("two")
        let result = loop.run(in: .default, for: .seconds(10))
        log.append("\(result)")
        port.invalidate()
        return log
      }
      #expect(log == ["port one", "port two", "fireAt", "at", "stopped"])
      let thread = try ResidentThread(name: "stopping")
      let refusal = try thread.performAndWait { () -> String in
        thread.stop()
        do {
          try thread.assumeIsolated().perform(after: .zero) {}
          return "accepted"
        } catch {
          return "\(error)"
        }
      }
      #expect(refusal.contains("was stopped"), "\(refusal)")
    }
  }
}

/// Reports, as it goes, whether it was released on `thread`.
final class ReleaseReporter {
  let name: String
  let thread: ResidentThread
  let recorder: Recorder

  init(_ name: String, on thread: ResidentThread, into recorder: Recorder) {
    self.name = name
    self.thread = thread
    self.recorder = recorder
  }

  deinit { recorder.log("\(name) \(thread.isCurrent ? "on its thread" : "elsewhere")") }
}

/// Whether an object was released, without keeping it.
final class WeakWatch {
  private weak var object: AnyObject?
  func watch(_ object: AnyObject) { self.object = object }
  var isReleased: Bool { object == nil }
}
