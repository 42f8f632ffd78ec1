import CRunLoopShims
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// CPU time a thread has used, read from the kernel's per-thread accounting.
func threadCPUTime(_ tid: pid_t) -> Duration? {
  // Fields 14 and 15 of /proc/self/task/TID/stat are utime and stime in clock ticks.
  guard let stat = try? String(contentsOfFile: "/proc/self/task/\(tid)/stat", encoding: .utf8),
    let close = stat.lastIndex(of: ")")
  else { return nil }
  let fields = stat[stat.index(after: close)...].split(separator: " ")
  // After "pid (comm)", field 3 is fields[0]; utime (14) is fields[11], stime (15) fields[12].
  guard fields.count > 12, let user = Int64(fields[11]), let system = Int64(fields[12]) else {
    return nil
  }
  let ticksPerSecond = Int64(sysconf(Int32(_SC_CLK_TCK)))
  return .milliseconds((user + system) * 1000 / ticksPerSecond)
}

func threadExists(_ tid: pid_t) -> Bool {
  FileManager.default.fileExists(atPath: "/proc/self/task/\(tid)")
}

func threadCount() -> Int {
  (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").count) ?? -1
}

extension RunLoopKitTests {
  @Suite("Resident thread") struct ResidentThreads {
    @Test("50. A resident thread stays alive with nothing to do, using no CPU while idle")
    func test_50_idleThreadUsesNoCPU() throws {
      let thread = try ResidentThread(name: "idle")
      let tid = thread.threadID
      let before = try #require(threadCPUTime(tid))
      var clockID = clockid_t()
      #expect(pthread_getcpuclockid(thread.core.thread, &clockID) == 0)
      var start = timespec()
      clock_gettime(clockID, &start)
      usleep(2_000_000)
      var end = timespec()
      clock_gettime(clockID, &end)
      let after = try #require(threadCPUTime(tid))
      #expect(thread.isRunning)
      #expect(threadExists(tid))
      // Under 1% of a core over 2 s is under 20 ms; the per-thread clock is exact to the ns.
      #expect(after - before < .milliseconds(20))
      let used = (end.tv_sec - start.tv_sec) * 1_000_000_000 + (end.tv_nsec - start.tv_nsec)
      print("idle resident thread: \(used) ns of CPU in 2 s (\(Double(used) / 2e7) % of a core)")
      #expect(used < 20_000_000)
      #expect(thread.loop.isWaiting)
      thread.stop()
      try thread.join()
    }

    @Test("51. perform runs blocks on that one thread, in the order posted by each poster")
    func test_51_performOrderAndThread() throws {
      let thread = try ResidentThread(name: "order")
      let seen = Box<[Int]>([])
      let tids = Box<Set<pid_t>>([])
      for index in 0..<1000 {
        try thread.perform {
          seen.value.append(index)
          tids.value.insert(crl_gettid())
        }
      }
      thread.stop()
      try thread.join()
      #expect(seen.value == Array(0..<1000))
      #expect(tids.value == [thread.threadID])
    }

    @Test("51b. 100 000 blocks from 4 posting threads all run exactly once, in order per poster")
    func test_51b_fourPostersHundredThousand() throws {
      let thread = try ResidentThread(name: "posters")
      let seen = Box<[[Int]]>(Array(repeating: [], count: 4))
      let posters = (0..<4).map { poster in
        TestThread {
          for index in 0..<25_000 {
            try? thread.perform { seen.value[poster].append(index) }
          }
        }
      }
      for poster in posters { poster.join() }
      thread.stop()
      try thread.join()
      for list in seen.value { #expect(list == Array(0..<25_000)) }
    }

    @Test("52. performAndWait returns the value or rethrows; on the thread itself it runs inline")
    func test_52_performAndWait() throws {
      struct Boom: Error, Equatable {}
      let thread = try ResidentThread(name: "wait")
      let tid = try thread.performAndWait { crl_gettid() }
      #expect(tid == thread.threadID)
      #expect(throws: Boom()) { try thread.performAndWait { throw Boom() } }
      var local = 0  // a non-Sendable capture is fine: the caller waits
      try thread.performAndWait { local = 42 }
      #expect(local == 42)
      let nested = try thread.performAndWait {
        try thread.performAndWait { "inline on \(crl_gettid() == thread.threadID)" }
      }
      #expect(nested == "inline on true")
      thread.stop()
      try thread.join()
      #expect(throws: LoopError.stopped(thread: "wait")) { try thread.performAndWait { 1 } }
    }

    @Test("52b. run(_:) awaits a result from the thread without blocking the caller's thread")
    func test_52b_asyncRun() async throws {
      let thread = try ResidentThread(name: "async")
      let tid = try await thread.run { crl_gettid() }
      #expect(tid == thread.threadID)
      struct Boom: Error {}
      await #expect(throws: Boom.self) { try await thread.run { throw Boom() } }
      thread.stop()
      try thread.join()
      await #expect(throws: LoopError.self) { try await thread.run { 1 } }
    }

    @Test(
      "53. stop() lets earlier blocks finish, join() returns once the thread is gone, later work is refused"
    )
    func test_53_stopAndJoin() throws {
      let thread = try ResidentThread(name: "stopper")
      let tid = thread.threadID
      let ran = Box(0)
      for _ in 0..<100 {
        try thread.perform {
          usleep(100)
          ran.value += 1
        }
      }
      thread.stop()
      thread.stop()  // idempotent
      #expect(!thread.isRunning)
      #expect(throws: LoopError.stopped(thread: "stopper")) { try thread.perform {} }
      try thread.join()
      try thread.join()  // joining again returns at once
      #expect(ran.value == 100)
      // pthread_join returns when the kernel clears the thread id; /proc may list the
      // task for a moment longer while it is reaped.
      #expect(waitUntil(seconds: 2) { !threadExists(tid) })
    }

    @Test("53b. stop() from the resident thread itself takes effect after the current block")
    func test_53b_stopFromItself() throws {
      let thread = try ResidentThread(name: "self-stop")
      let recorder = Recorder()
      try thread.perform {
        thread.stop()
        recorder.log("after stop, same block")
        #expect(throws: LoopError.self) { try thread.perform {} }
      }
      try thread.join()
      #expect(recorder.all == ["after stop, same block"])
      let joinOnItself = try ResidentThread(name: "self-join")
      let error = try joinOnItself.performAndWait { () -> LoopError? in
        do throws(LoopError) {
          try joinOnItself.join()
          return nil
        } catch { return error }
      }
      #expect(error == .calledOnOwnThread(operation: "join()", thread: "self-join"))
    }

    @Test("53c. Every post racing with stop() either runs or is refused, never neither")
    func test_53c_stopRacingWithPosts() throws {
      for round in 0..<200 {
        let thread = try ResidentThread(name: "race\(round % 10)")
        let accepted = Box(0)
        let ran = Box(0)
        let poster = TestThread {
          for _ in 0..<50 {
            do {
              try thread.perform { ran.value += 1 }
              accepted.value += 1
            } catch {}
          }
        }
        thread.stop()
        poster.join()
        try thread.join()
        #expect(ran.value == accepted.value)
      }
    }

    @Test(
      "54. Dropping the last reference stops and joins (or detaches on itself); no thread or fd leaks"
    )
    func test_54_dropStopsAndJoins() throws {
      let fdsBefore = openDescriptorCount()
      // A never-signalled source on the thread's loop gets its cancel callback when the loop
      // is torn down, on the resident thread, just before the thread ends: what came first,
      // that teardown or the drop returning, tells joining from detaching.
      let order = Recorder()
      func markTeardown(_ thread: ResidentThread) throws {
        try thread.loop.add(
          ManualSource(cancel: { _, _ in order.log("torn down") }, perform: {}), to: .default)
      }

      // Dropped on another thread: the drop returns only once the thread has been joined, so
      // its teardown already happened and its descriptors are already closed, with no wait.
      var tid: pid_t = 0
      do {
        let thread = try ResidentThread(name: "dropped")
        tid = thread.threadID
        try markTeardown(thread)
        #expect(threadExists(tid))
      }
      order.log("drop returned")
      #expect(order.all == ["torn down", "drop returned"])
      #expect(openDescriptorCount() == fdsBefore)
      // pthread_join returns when the kernel clears the thread id; /proc may list the
      // task for a moment longer while it is reaped.
      #expect(waitUntil(seconds: 2) { !threadExists(tid) })

      // Dropped on the thread itself: nobody can join it there, so it detaches; the drop
      // returns at once, and the thread tears down and exits later, on its own.
      order.clear()
      let holder = Box<ResidentThread?>(try ResidentThread(name: "self-drop"))
      let selfTID = holder.value!.threadID
      try markTeardown(holder.value!)
      try holder.value!.perform {
        holder.value = nil
        order.log("drop returned")
      }
      #expect(waitUntil { !threadExists(selfTID) })
      #expect(order.all == ["drop returned", "torn down"])
      #expect(waitUntil { openDescriptorCount() == fdsBefore })
    }

    @Test(
      "54b. 1 000 start/stop/join cycles leave the fd count and thread count where they started")
    func test_54b_startStopCycles() throws {
      // Warm up anything the first thread creates lazily (Foundation, the test runner).
      try ResidentThread(name: "warm-up").stop()
      usleep(50_000)
      let fds = openDescriptorCount()
      let threads = threadCount()
      for cycle in 0..<1000 {
        let thread = try ResidentThread(name: "cycle\(cycle % 100)")
        try thread.perform {}
        thread.stop()
        try thread.join()
      }
      #expect(openDescriptorCount() == fds)
      #expect(waitUntil { threadCount() == threads })
    }

    @Test("56. Bad name or stack size is refused before any thread is created")
    func test_56_badConfiguration() throws {
      let threads = threadCount()
      #expect(throws: LoopError.self) { try ResidentThread(name: "sixteen-bytes-xx") }
      #expect(throws: LoopError.self) { try ResidentThread(name: "ünïcödé-näme") }  // 18 bytes
      #expect(throws: LoopError.self) { try ResidentThread(name: "ok", stackSize: 8 * 1024) }
      #expect(throws: LoopError.self) { try ResidentThread(name: "ok", stackSize: 64 * 1024 + 100) }
      #expect(throws: LoopError.self) { try ResidentThread(name: "ok", niceness: 40) }
      #expect(throws: LoopError.self) { try ResidentThread(name: "ok", cpuAffinity: [-1]) }
      #expect(throws: LoopError.self) { try ResidentThread(name: "ok", cpuAffinity: []) }
      #expect(threadCount() == threads)
      do throws(LoopError) {
        _ = try ResidentThread(name: "sixteen-bytes-xx")
      } catch {
        #expect(error.description.contains("\"sixteen-bytes-xx\""))
        #expect(error.description.contains("16 bytes"))
      }
      // Exactly 15 bytes, a custom stack, niceness and affinity all work.
      let thread = try ResidentThread(
        name: "fifteen-bytes-x", stackSize: 256 * 1024, niceness: 5, cpuAffinity: [0])
      let comm = try String(
        contentsOfFile: "/proc/self/task/\(thread.threadID)/comm", encoding: .utf8)
      #expect(comm == "fifteen-bytes-x\n")
      thread.stop()
      try thread.join()
    }

    @Test("Thread storage is typed and private to each thread")
    func test_threadStorage() throws {
      let counterKey = ThreadStorageKey<Int>("counter")
      let otherKey = ThreadStorageKey<Int>("counter")
      let thread = try ResidentThread(name: "storage")
      let values = try thread.performAndWait { () -> (Int?, Int?, Int) in
        thread.storage[counterKey] = 1
        thread.storage[counterKey]! += 1
        return (thread.storage[counterKey], thread.storage[otherKey], thread.storage.count)
      }
      #expect(values.0 == 2)
      #expect(values.1 == nil)
      #expect(values.2 == 1)
      #expect(ThreadStorage.current[counterKey] == nil)
      thread.stop()
      try thread.join()
    }

    @Test(
      "Thread storage keeps values of several types, removes on nil, and the article's counter counts"
    )
    func test_threadStorageTypesAndArticle() throws {
      let thread = try ResidentThread(name: "storage2")
      defer { thread.stop() }
      let name = ThreadStorageKey<String>("name")
      let list = ThreadStorageKey<[Int]>("list")
      let done = Gate()
      // --- ThreadBoundState.md: ThreadStorage ---
      try thread.perform {
        let storage = thread.storage
        storage[Keys.searches] = (storage[Keys.searches] ?? 0) + 1
      }
      // --- end ---
      try thread.perform { done.open() }
      #expect(done.wait())
      let values = try thread.performAndWait { () -> (Int?, String?, [Int]?, Int, Int) in
        let storage = thread.storage
        storage[Keys.searches] = (storage[Keys.searches] ?? 0) + 1
        storage[name] = "a"
        storage[name] = "b"
        storage[list] = [1]
        storage[list]?.append(2)
        let countWithAll = storage.count
        storage[name] = nil
        return (storage[Keys.searches], storage[name], storage[list], countWithAll, storage.count)
      }
      #expect(values.0 == 2)
      #expect(values.1 == nil)
      #expect(values.2 == [1, 2])
      #expect(values.3 == 3)
      #expect(values.4 == 2)
    }

    @Test("Users can add their own sources and timers to the resident thread's loop")
    func test_loopAccess() throws {
      let thread = try ResidentThread(name: "timers")
      let fired = Box<pid_t?>(nil)
      try thread.loop.add(
        LoopTimer(after: .milliseconds(10)) { _ in fired.value = crl_gettid() }, to: .default)
      #expect(waitUntil { fired.value != nil })
      #expect(fired.value == thread.threadID)
      thread.stop()
      try thread.join()
    }
  }
}

/// The article's key (*Thread-bound state*, ThreadStorage).
enum Keys { static let searches = ThreadStorageKey<Int>("searches") }
