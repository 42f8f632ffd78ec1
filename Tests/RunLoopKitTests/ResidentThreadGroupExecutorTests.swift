import CRunLoopShims
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

/// The threads that ran something, in order, shared by tasks running on several threads.
private final class ThreadsSeen: @unchecked Sendable {  // `tids` is guarded by `lock`
  private let lock = NSLock()
  private var tids: [pid_t] = []

  /// Records the calling thread.
  func record() { lock.withLock { tids.append(crl_gettid()) } }
  var all: [pid_t] { lock.withLock { tids } }
  var distinct: Int { Set(all).count }
}

/// A default actor (no executor of its own): its jobs run where its callers' tasks prefer.
private actor Tally {
  var total = 0
  func add(_ value: Int) -> (total: Int, tid: pid_t) {
    total += value
    return (total, crl_gettid())
  }
}

extension RunLoopKitTests {
  @Suite("Resident thread group: its task executor") struct ResidentThreadGroupExecutor {
    @Test(
      "85. withTaskExecutorPreference(group.executor) runs child tasks on all 4 threads at once, and awaits resume on the group"
    )
    func test_85_executorUsesEveryThread() async throws {
      let group = try ResidentThreadGroup(count: 4, name: "exec")
      let ids = Set(group.threads.map(\.threadID))
      let seen = ThreadsSeen()
      // 16 children enqueued back to back take 16 consecutive turns, 4 per thread. Each holds
      // its thread until 4 different threads have run a child: only 4 threads running at the
      // same time can get there (bounded, so a failure fails instead of hanging).
      let results = await withTaskExecutorPreference(group.executor) {
        await withTaskGroup(of: Bool.self) { children in
          for _ in 0..<16 {
            children.addTask {
              seen.record()
              return waitUntil(seconds: 10) { seen.distinct == 4 }
            }
          }
          return await children.reduce(into: [Bool]()) { $0.append($1) }
        }
      }
      #expect(results == Array(repeating: true, count: 16))
      #expect(Set(seen.all) == ids)
      #expect(ids.map { id in seen.all.filter { $0 == id }.count } == [4, 4, 4, 4])

      // One task that yields 8 times resumes on the group's threads each time. (Which ones is
      // the runtime's business: a yield may take one turn or two, a continuation job first.)
      let hops = await Task(executorPreference: group.executor) { () -> [pid_t] in
        var tids = [crl_gettid()]
        for _ in 0..<8 {
          await Task.yield()
          tids.append(crl_gettid())
        }
        return tids
      }.value
      #expect(Set(hops).isSubset(of: ids))
      group.stop()
      try group.join()
    }

    @Test(
      "85. Tasks on the group's executor call actors (default and pinned to one thread), sleep, and resume on the group with their results"
    )
    func test_85_executorActorsAndResumption() async throws {
      let group = try ResidentThreadGroup(count: 2, name: "resume")
      let ids = Set(group.threads.map(\.threadID))
      let tally = Tally()
      let pinned = PinnedCounter(thread: group.threads[1])
      let outcome = await Task(executorPreference: group.executor) {
        () -> (totals: [Int], actorTIDs: Set<pid_t>, pinnedTIDs: Set<pid_t>, resumedOn: Set<pid_t>)
        in
        var totals: [Int] = []
        var actorTIDs: Set<pid_t> = []
        var pinnedTIDs: Set<pid_t> = []
        var resumedOn: Set<pid_t> = [crl_gettid()]
        for value in 1...100 {
          let (total, tid) = await tally.add(value)
          totals.append(total)
          actorTIDs.insert(tid)
          resumedOn.insert(crl_gettid())
          let (_, pinnedTID) = await pinned.increment()
          pinnedTIDs.insert(pinnedTID)
          resumedOn.insert(crl_gettid())
        }
        try? await Task.sleep(for: .milliseconds(5))
        resumedOn.insert(crl_gettid())
        return (totals, actorTIDs, pinnedTIDs, resumedOn)
      }.value
      #expect(outcome.totals == (1...100).map { $0 * ($0 + 1) / 2 })
      // A default actor runs its jobs on the caller's preferred executor: the group.
      #expect(outcome.actorTIDs.isSubset(of: ids))
      #expect(outcome.pinnedTIDs == [group.threads[1].threadID])
      #expect(outcome.resumedOn.isSubset(of: ids))
      #expect(await pinned.count == 100)
      #expect(await tally.total == 5050)
      group.stop()
      try group.join()
    }

    @Test(
      "85. After stop() the group's executor still runs jobs on a thread that has not exited; an exited thread passes its job on"
    )
    func test_85_executorAfterStop() async throws {
      let group = try ResidentThreadGroup(count: 2, name: "handoff")
      // Thread 0 is gone; thread 1 is held in a block.
      group.threads[0].stop()
      try group.threads[0].join()
      let arrived = Gate()
      let release = Gate()
      try group.threads[1].perform {
        arrived.open()
        release.wait()
      }
      #expect(arrived.wait())
      group.stop()
      // Thread 0's turn (the first): refused there, queued on thread 1 behind its block, run in
      // its final drain.
      let task = Task(executorPreference: group.executor) { crl_gettid() }
      release.open()
      #expect(await task.value == group.threads[1].threadID)
      try group.join()
    }

    @Test("85. A job for the group's executor after every thread exited traps, naming the group")
    func test_85_executorAfterExitTraps() async {
      let result = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
        let group = try ResidentThreadGroup(count: 2, name: "gone")
        group.stop()
        try group.join()
        _ = await Task(executorPreference: group.executor) { 1 }.value
      }
      let message = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
      #expect(
        message.contains("executor of ResidentThreadGroup \"gone\" after all 2 of its threads"),
        "\(message)")
    }
  }
}
