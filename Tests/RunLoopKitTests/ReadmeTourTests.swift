import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// The README's API tour, verbatim, so the README cannot drift from code that compiles and runs.
extension RunLoopKitTests {
  @Suite("README tour") struct ReadmeTour {
    @Test("Thread-bound state: a non-Sendable connection handed to a descriptor source")
    func tourThreadBoundHandOver() throws {
      let network = try ResidentThread(name: "network")
      let messages = Recorder()
      let (readEnd, writeEnd) = makePipe()
      defer { close(readEnd) }
      // --- README: hand it over ---
      // A connection's state: a plain class, neither Sendable nor locked.
      final class Connection {
        var received: [UInt8] = []
      }
      let connection = Connection()
      let reader = DescriptorSource(fileDescriptor: readEnd) { source, events in
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = read(readEnd, &buffer, buffer.count)
        connection.received += buffer.prefix(max(count, 0))  // only ever on the network thread
        if events.contains(.hangUp) {  // the peer closed: a Sendable copy of the data may leave
          messages.log(String(decoding: connection.received, as: UTF8.self))
          source.invalidate()
        }
      }
      try network.loop.add(reader, to: .default)
      // --- end ---
      _ = write(writeEnd, "hi", 2)
      // Only the handler reads the pipe: once it is empty, the handler has read the data.
      #expect(waitUntil { !hasDataToRead(readEnd) })
      #expect(reader.isValid)
      close(writeEnd)
      // Told of the hang-up, the handler passed on what the connection received and let go.
      #expect(waitUntil { !reader.isValid })
      #expect(messages.all == ["hi"])
      // --- README: delayed ---
      let retry = try network.perform(after: .seconds(2)) { print("reconnecting") }
      let prevented = retry.cancel()  // true: it will not run; false: it had already started
      // --- end ---
      #expect(prevented)
      #expect(retry.state == .cancelled)
      reader.invalidate()
    }

    @Test("Thread-bound state: a result set in a LoopBoundBox shared by callbacks")
    func tourThreadBoundBox() async throws {
      // --- README: bind it ---
      final class ResultSet {
        var rows: [String] = []
      }
      let database = try ResidentThread(name: "database")
      // Made on the database thread, and opened only there.
      let results = try database.performAndWait { LoopBoundBox(ResultSet(), loop: .current) }
      try database.perform { results.value.rows += ["apple", "apricot", "banana"] }
      let refresh = try LoopTimer(after: .milliseconds(10)) { _ in
        results.value.rows.append("avocado")  // another callback on that thread opens it too
      }
      try database.loop.add(refresh, to: .common)
      let matches = try await database.run {  // ask the thread; only Sendable values come back
        results.value.rows.filter { $0.hasPrefix("ap") }
      }
      // --- end ---
      #expect(matches == ["apple", "apricot"])
      let all = try await database.run { results.value.rows }
      #expect(all.prefix(3) == ["apple", "apricot", "banana"])
    }

    @Test("Tour 1: Keep a thread alive with a port and send it work")
    func tourKeepAlive() throws {
      let handled = Recorder()
      // --- README: keep-alive ---
      let jobs = try LoopPort<String> { job in
        handled.log(job)  // runs on the worker thread, in the order sent
        if job == "quit" { Loop.current.stop() }
      }
      let worker = Thread {
        let loop = Loop.current
        try? loop.add(jobs, to: .default)  // the port keeps the default mode alive
        loop.run()  // sleeps in epoll_wait until a message (or stop) arrives
      }
      worker.start()
      try jobs.send("find \"apple\"")
      try jobs.send("quit")
      // --- end ---
      #expect(waitUntil { handled.all == ["find \"apple\"", "quit"] })
    }

    @Test("Tour 2: A timer in the common modes keeps firing while the loop tracks")
    func tourCommonTimer() throws {
      let ticks = try onLoopThread { _ in
        // --- README: common modes ---
        let loop = Loop.current
        let tick = try LoopTimer(
          after: .milliseconds(100), repeating: .milliseconds(100), tolerance: .milliseconds(10)
        ) { _ in
          print("tick")  // fires in default… and in "tracking" once it is a common mode
        }
        try loop.add(tick, to: .common)
        try loop.addCommonMode("tracking")
        loop.run(in: "tracking", for: .milliseconds(350))
        tick.invalidate()
        // --- end ---
        return loop.metrics.timersFired
      }
      #expect(ticks >= 2)
    }

    @Test("Tour 3: A descriptor source on a pipe")
    func tourDescriptorSource() throws {
      let result = try onLoopThread { _ in
        // --- README: descriptor source ---
        let loop = Loop.current
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { fatalError("pipe failed") }
        let (readEnd, writeEnd) = (fds[0], fds[1])
        let reader = DescriptorSource(fileDescriptor: readEnd, interest: .readable) {
          source, events in
          var buffer = [UInt8](repeating: 0, count: 64)
          let count = read(readEnd, &buffer, buffer.count)
          print("read \(count) bytes; events \(events)")
          if events.contains(.hangUp) { source.invalidate() }
        }
        try loop.add(reader, to: .default)
        _ = write(writeEnd, "hi", 2)
        let result = loop.run(for: .seconds(1), returnAfterSourceHandled: true)  // .handledSource
        reader.invalidate()
        close(readEnd)
        close(writeEnd)
        // --- end ---
        return result
      }
      #expect(result == .handledSource)
    }

    @Test("Tour 4: A resident thread: send it work, wait for it, await it, stop it")
    func tourResidentThread() async throws {
      // --- README: resident thread ---
      let searcher = try ResidentThread(name: "search")
      let rows = ["apple", "apricot", "banana"]  // stands for results bound to one thread
      try searcher.perform { print("on it: \(searcher.isCurrent)") }  // async, FIFO per poster
      let count = try searcher.performAndWait { rows.count }  // waits; inline if on the thread
      let hits = try await searcher.run { rows.filter { $0.hasPrefix("ap") } }  // no thread blocked
      searcher.stop()  // runs what was already sent, then ends the loop and the thread
      try searcher.join()
      // --- end ---
      #expect(count == 3)
      #expect(hits == ["apple", "apricot"])
      #expect(throws: LoopError.stopped(thread: "search")) { try searcher.perform {} }
    }

    @Test("Tour 5: An actor pinned to a resident thread")
    func tourPinnedActor() async throws {
      let thread = try ResidentThread(name: "db")
      let index = SearchIndex(thread: thread)
      await index.insert("apple")
      let found = await index.find("app")
      #expect(found == ["apple"])
      thread.stop()
      try thread.join()
    }

    @Test("Tour 6: Trace a run and print it as a timeline, or draw it as swim lanes")
    func tourTracer() throws {
      let svgPath = FileManager.default.temporaryDirectory.appendingPathComponent(
        "readme-trace-\(getpid()).svg"
      ).path
      let timeline = try onLoopThread { _ -> String in
        // --- README: tracer ---
        let loop = Loop.current
        let tracer = LoopTracer()
        try tracer.attach(to: loop)
        try loop.add(LoopTimer(label: "tick", after: .milliseconds(15)) { _ in }, to: .default)
        try loop.perform {}
        loop.run(for: .seconds(1))  // .finished: nothing is left once the one-shot timer fired
        tracer.detach()
        print(tracer.timeline())
        try tracer.svg().write(toFile: svgPath, atomically: true, encoding: .utf8)
        // --- end ---
        return tracer.timeline()
      }
      defer { try? FileManager.default.removeItem(atPath: svgPath) }
      #expect(timeline.contains("ran 1 block"))
      #expect(timeline.contains("woken by timer"))
      #expect(timeline.contains("timer \"tick\" fired"))
      #expect(timeline.contains("returned .finished"))
      #expect(SVGSummary(try String(contentsOfFile: svgPath, encoding: .utf8)).error == nil)
    }
  }
}

// --- README: pinned actor ---
actor SearchIndex {
  let thread: ResidentThread
  private var words: [String] = []

  init(thread: ResidentThread) { self.thread = thread }

  // Every job of this actor runs on `thread`, one at a time.
  nonisolated var unownedExecutor: UnownedSerialExecutor {
    thread.executor.asUnownedSerialExecutor()
  }

  func insert(_ word: String) { words.append(word) }
  func find(_ prefix: String) -> [String] { words.filter { $0.hasPrefix(prefix) } }
}
// --- end ---

/// Whether `fd` has data ready to read now (a zero-timeout poll).
private func hasDataToRead(_ fd: Int32) -> Bool {
  var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
  return poll(&entry, 1, 0) == 1 && entry.revents & Int16(POLLIN) != 0
}
