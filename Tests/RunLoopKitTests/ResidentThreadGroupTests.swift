import CRunLoopShims
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// One group thread's record of the blocks it ran; written only on that thread, read once the
/// group has been joined.
private final class ThreadLog: @unchecked Sendable {  // one writer thread, read after join
  var entries: [Int] = []
}

/// A field of a thread's status file (`/proc/self/task/TID/status`, or `thread-self`), such as
/// `Cpus_allowed_list`.
private func statusField(_ field: String, path: String) -> String? {
  guard let status = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
  for line in status.split(separator: "\n") where line.hasPrefix(field + ":") {
    return line.dropFirst(field.count + 1).trimmingCharacters(in: .whitespaces)
  }
  return nil
}

/// A CPU list as the kernel writes it ("0-2,4") as a sorted list of CPUs.
private func cpus(inList list: String) -> [Int] {
  list.split(separator: ",").flatMap { range -> [Int] in
    let bounds = range.split(separator: "-").compactMap { Int($0) }
    guard let low = bounds.first else { return [] }
    return Array(low...(bounds.last ?? low))
  }
}

extension RunLoopKitTests {
  @Suite("Resident thread group") struct ResidentThreadGroups {
    @Test(
      "85. A group names its threads name-0…name-3 (as the kernel shows them), next() is round-robin, any() keeps a member's own thread"
    )
    func test_85_namesNextAndAny() throws {
      let group = try ResidentThreadGroup(count: 4, name: "grp")
      #expect(group.count == 4)
      #expect(group.threads.count == 4)
      for (index, thread) in group.threads.enumerated() {
        #expect(thread.name == "grp-\(index)")
        let comm = try String(
          contentsOfFile: "/proc/self/task/\(thread.threadID)/comm", encoding: .utf8)
        #expect(comm == "grp-\(index)\n")
        let own = try thread.performAndWait { ThreadName.of(pthread_self()) }
        #expect(own == "grp-\(index)")
        #expect(thread.isRunning)
      }
      #expect(Set(group.threads.map { $0.threadID }).count == 4)

      // Two full cycles, in index order.
      let handedOut = (0..<8).map { _ in group.next() }
      let expected = (0..<8).map { group.threads[$0 % 4] }
      #expect(zip(handedOut, expected).allSatisfy { $0 === $1 })

      // On a member, any() is that member and does not take a turn.
      for thread in group.threads {
        #expect(try thread.performAndWait { group.any() === thread })
      }
      // Elsewhere (this thread, another group's thread) it is next(): the turn is at 0 again.
      #expect(group.any() === group.threads[0])
      let other = try ResidentThreadGroup(count: 1, name: "other")
      #expect(try other.threads[0].performAndWait { group.any() === group.threads[1] })
      #expect(group.next() === group.threads[2])

      // join() on one of the group's own threads would wait for itself.
      let refused = try group.threads[2].performAndWait { () -> LoopError? in
        do throws(LoopError) {
          try group.join()
          return nil
        } catch { return error }
      }
      #expect(refused == .calledOnOwnThread(operation: "join()", thread: "grp-2"))
      #expect(group.threads.allSatisfy { $0.isRunning })
      group.stop()
      try group.join()
      other.stop()
      try other.join()
    }

    @Test(
      "85. 100 000 posts from 4 posters through next() each run exactly once, on the thread they went to, 25 000 per thread"
    )
    func test_85_fourPostersHundredThousand() throws {
      let group = try ResidentThreadGroup(count: 4, name: "posts")
      let ids = group.threads.map(\.threadID)
      let logs = (0..<4).map { _ in ThreadLog() }
      let wrongThread = Counter()
      let refused = Counter()
      let perPoster = 25_000
      let posters = (0..<4).map { poster in
        TestThread {
          for index in 0..<perPoster {
            let thread = group.next()
            let slot = group.threads.firstIndex { $0 === thread }!
            let log = logs[slot]
            let expected = ids[slot]
            do {
              try thread.perform {
                if crl_gettid() != expected { wrongThread.increment() }
                log.entries.append(poster * perPoster + index)
              }
            } catch {
              refused.increment()
            }
          }
        }
      }
      for poster in posters { poster.join() }
      group.stop()
      try group.join()

      #expect(refused.value == 0)
      #expect(wrongThread.value == 0)
      // One shared turn: 100 000 turns give every thread exactly a quarter.
      #expect(logs.map { $0.entries.count } == [25_000, 25_000, 25_000, 25_000])
      // Every post ran once: none lost, none doubled.
      #expect(logs.flatMap { $0.entries }.sorted() == Array(0..<(4 * perPoster)))
      // Each thread ran each poster's blocks in the order that poster posted them.
      for log in logs {
        for poster in 0..<4 {
          let mine = log.entries.filter { $0 / perPoster == poster }
          #expect(mine == mine.sorted())
        }
      }
    }

    @Test(
      "85. stop() with work queued behind blocked threads: all of it runs, later posts throw .stopped, join() returns, the threads are gone"
    )
    func test_85_stopWithQueuedWork() throws {
      let group = try ResidentThreadGroup(count: 4, name: "stopq")
      let ids = group.threads.map(\.threadID)
      let arrived = (0..<4).map { _ in Gate() }
      let release = (0..<4).map { _ in Gate() }
      let released = Counter()
      for index in 0..<4 {
        try group.threads[index].perform {
          arrived[index].open()
          if release[index].wait() { released.increment() }
        }
      }
      for gate in arrived { #expect(gate.wait()) }

      let ran = Counter()
      let ranOn = (0..<4).map { _ in Counter() }
      for _ in 0..<1_000 {
        let thread = group.next()
        let slot = group.threads.firstIndex { $0 === thread }!
        try thread.perform {
          if crl_gettid() == ids[slot] { ranOn[slot].increment() }
          ran.increment()
        }
      }
      group.stop()
      group.stop()  // idempotent
      // stop() did not wait: every thread is still held in its first block, nothing ran.
      #expect(ran.value == 0)
      #expect(group.threads.allSatisfy { !$0.isRunning })
      for thread in group.threads {
        #expect(throws: LoopError.stopped(thread: thread.name)) { try thread.perform {} }
      }
      #expect(throws: LoopError.stopped(thread: "stopq-0")) { try group.next().perform {} }

      for gate in release { gate.open() }
      try group.join()
      try group.join()  // again: returns at once
      #expect(released.value == 4)
      #expect(ran.value == 1_000)
      #expect(ranOn.map { $0.value } == [250, 250, 250, 250])
      // pthread_join returns when the kernel clears the thread id; /proc may list the task
      // for a moment longer while it is reaped.
      for id in ids { #expect(waitUntil(seconds: 2) { !threadExists(id) }) }
    }

    @Test(
      "85. A bad count, an over-long suffixed name or a bad thread setting is refused before any thread is created"
    )
    func test_85_validation() throws {
      let threads = threadCount()
      #expect(
        throws: LoopError.invalidArgument(
          name: "thread count", value: "0", reason: "a group needs at least one thread")
      ) { try ResidentThreadGroup(count: 0, name: "none") }
      #expect(throws: LoopError.self) { try ResidentThreadGroup(count: -1, name: "none") }
      do throws(LoopError) {
        _ = try ResidentThreadGroup(count: 11, name: "thirteen-byte")
        Issue.record("a 16-byte suffixed name was accepted")
      } catch {
        // Names the suffixed name that is too long, and by how much.
        #expect(error.description.contains("\"thirteen-byte-10\""), "\(error)")
        #expect(error.description.contains("16 bytes, 1 over the 15"), "\(error)")
      }
      #expect(throws: LoopError.self) { try ResidentThreadGroup(count: 2, name: "fourteen-bytes") }
      #expect(throws: LoopError.self) {
        try ResidentThreadGroup(count: 2, name: "stack", stackSize: 8 * 1024)
      }
      #expect(throws: LoopError.self) {
        try ResidentThreadGroup(count: 2, name: "nice", niceness: 40)
      }
      #expect(throws: LoopError.self) { try ResidentThreadGroup(count: 1, name: "nul\0") }
      // Thread 3's CPU set is empty: refused after every index was asked, before any start.
      let asked = Box<[Int]>([])
      #expect(throws: LoopError.self) {
        try ResidentThreadGroup(count: 4, name: "cpus") { index in
          asked.value.append(index)
          return index == 3 ? [] : [0]
        }
      }
      #expect(asked.value == [0, 1, 2, 3])
      #expect(threadCount() == threads)

      // Exactly 15 bytes is fine.
      let group = try ResidentThreadGroup(count: 11, name: "twelve-bytes")
      #expect(group.threads.last?.name == "twelve-bytes-10")
      group.stop()
      try group.join()
    }

    @Test(
      "85. A thread the kernel refuses (thread 2 pinned to a CPU that does not exist) stops and joins the two already started"
    )
    func test_85_failedStartRollsBack() throws {
      let threads = threadCount()
      do throws(LoopError) {
        _ = try ResidentThreadGroup(count: 4, name: "roll") { index in index == 2 ? [1000] : nil }
        Issue.record("a thread pinned to CPU 1000 started")
      } catch {
        guard case .system(let system) = error else {
          Issue.record("expected a system error, got \(error)")
          return
        }
        #expect(system.errno == EINVAL, "\(error)")
      }
      #expect(waitUntil(seconds: 2) { threadCount() == threads })
      let names = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/task").compactMap
      {
        try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8)
      }
      #expect(!names.contains { $0.hasPrefix("roll-") })
    }

    @Test(
      "85. cpuAffinity pins thread i to CPU i % (allowed CPUs), as the thread itself reads back")
    func test_85_affinity() throws {
      let allowed = cpus(
        inList: try #require(statusField("Cpus_allowed_list", path: "/proc/thread-self/status")))
      try #require(!allowed.isEmpty)
      let group = try ResidentThreadGroup(count: 4, name: "pinned") {
        [allowed[$0 % allowed.count]]
      }
      for (index, thread) in group.threads.enumerated() {
        let own = try thread.performAndWait {
          statusField("Cpus_allowed_list", path: "/proc/thread-self/status")
        }
        let cpu = allowed[index % allowed.count]
        #expect(own.map(cpus(inList:)) == [cpu])
        let seen = statusField(
          "Cpus_allowed_list", path: "/proc/self/task/\(thread.threadID)/status")
        #expect(seen.map(cpus(inList:)) == [cpu])
      }
      group.stop()
      try group.join()
    }

    @Test(
      "85. Dropping the group stops and joins every thread after its posted work; dropped on its own thread, it waits for none"
    )
    func test_85_dropStopsAndJoins() throws {
      let fds = openDescriptorCount()
      // Dropped here: returns once every thread is gone, after the work posted before the drop.
      let ran = Counter()
      var ids: [pid_t] = []
      do {
        let group = try ResidentThreadGroup(count: 3, name: "drop")
        ids = group.threads.map(\.threadID)
        for _ in 0..<300 { try group.next().perform { ran.increment() } }
      }
      #expect(ran.value == 300)
      for id in ids { #expect(waitUntil(seconds: 2) { !threadExists(id) }) }
      #expect(openDescriptorCount() == fds)

      // Dropped on thread 1 while thread 0 waits for an answer from thread 1: waiting there for
      // thread 0 would wait for itself. The drop returns at once, thread 1 then answers thread
      // 0, and both threads exit on their own.
      let holder = Box<ResidentThreadGroup?>(try ResidentThreadGroup(count: 2, name: "self-drop"))
      let (zero, one) = (holder.value!.threads[0], holder.value!.threads[1])
      ids = [zero.threadID, one.threadID]
      let order = Recorder()
      let dropNow = Gate()
      let asked = Gate()
      try one.perform {
        dropNow.wait()
        holder.value = nil
        order.log("drop returned")
      }
      try zero.perform {
        let answered = Gate()
        do {
          try one.perform {
            order.log("one answers zero")
            answered.open()
          }
        } catch {
          order.log("refused: \(error)")
        }
        asked.open()
        order.log(answered.wait() ? "zero got its answer" : "zero timed out")
      }
      #expect(asked.wait())
      dropNow.open()
      #expect(waitUntil(seconds: 10) { order.all.count == 3 })
      #expect(order.all == ["drop returned", "one answers zero", "zero got its answer"])
      // Both were stopped by the drop, though this test still holds their handles.
      #expect(!zero.isRunning && !one.isRunning)
      #expect(throws: LoopError.stopped(thread: "self-drop-0")) { try zero.perform {} }
      try zero.join()
      try one.join()
      for id in ids { #expect(waitUntil(seconds: 2) { !threadExists(id) }) }
      #expect(waitUntil { openDescriptorCount() == fds })
    }
  }
}
