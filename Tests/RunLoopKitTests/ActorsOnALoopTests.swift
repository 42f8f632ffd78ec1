import CRunLoopShims
import Glibc
import Synchronization
import Testing

@testable import RunLoopKit

/// A global actor whose executor is a resident thread's: what an app's database actor looks
/// like. Its thread lives as long as the test process.
@globalActor actor DatabaseActor {
  static let shared = DatabaseActor()
  static let thread = try! ResidentThread(name: "database")

  nonisolated var unownedExecutor: UnownedSerialExecutor {
    Self.thread.executor.asUnownedSerialExecutor()
  }
}

/// State isolated to the global actor, and code that arms the thread's callbacks from there:
/// those closures are isolated to `DatabaseActor` too, so they call its code synchronously.
@DatabaseActor final class Rows {
  var rows: [String] = []
  var flushes = 0
  var flushThreads: Set<pid_t> = []

  func insert(_ row: String) { rows.append(row) }

  func flush() {
    flushes += 1
    flushThreads.insert(crl_gettid())
  }

  /// `flushed` opens after the third flush.
  func armFlushTimer(flushed: Gate) throws -> LoopTimer {
    try DatabaseActor.thread.assumeIsolated().addTimer(
      after: .milliseconds(1), repeating: .milliseconds(1)
    ) { timer in
      self.flush()  // a @DatabaseActor method, called synchronously
      if self.flushes == 3 {
        timer.invalidate()
        flushed.open()
      }
    }
  }
}

/// An actor pinned to any loop (not a global one): its methods arm that loop's callbacks with
/// closures isolated to it.
actor CallbackCounter {
  let loop: Loop
  var count = 0
  nonisolated var unownedExecutor: UnownedSerialExecutor {
    loop.executor.asUnownedSerialExecutor()
  }

  init(loop: Loop) { self.loop = loop }

  func increment() { count += 1 }

  /// `ticked` opens after the second tick.
  func armTwoTicks(ticked: Gate) throws {
    try loop.assumeIsolated().addTimer(after: .zero, repeating: .milliseconds(1), to: .common) {
      timer in
      self.increment()
      if self.count == 2 {
        timer.invalidate()
        ticked.open()
      }
    }
  }
}

extension RunLoopKitTests {
  @Suite("Actors on a loop") struct ActorsOnALoop {
    @Test(
      "75. A global actor pinned to a resident thread: callbacks armed from its code through the view call its code synchronously, on its thread"
    )
    func test_75_globalActorCallbacks() async throws {
      let rows = Rows()
      let flushed = Gate()
      let timer = try await rows.armFlushTimer(flushed: flushed)
      #expect(flushed.wait())
      #expect(await rows.flushes == 3)
      #expect(!timer.isValid)
      #expect(await rows.flushThreads == [DatabaseActor.thread.threadID])
    }

    @Test(
      "75. An actor pinned to a loop arms its own callbacks, and actor.assumeIsolated works in that loop's other callbacks"
    )
    func test_75_pinnedActorCallbacks() async throws {
      let thread = try ResidentThread(name: "pinned")
      let counter = CallbackCounter(loop: thread.loop)
      let ticked = Gate()
      try await counter.armTwoTicks(ticked: ticked)
      #expect(ticked.wait())
      #expect(await counter.count == 2)
      // A plain timer made elsewhere (its closure nonisolated) enters the actor's isolation
      // synchronously: on the loop's thread the executor says it is isolated.
      let done = Gate()
      try thread.loop.add(
        LoopTimer(after: .zero) { _ in
          counter.assumeIsolated { $0.increment() }
          done.open()
        }, to: .common)
      #expect(done.wait())
      #expect(await counter.count == 3)
    }

    @Test(
      "75. From a plain callback, Task.immediate enters a global actor pinned to that loop at once, on the loop's thread"
    )
    func test_75_taskImmediateFromCallback() async throws {
      let order = Recorder()
      let rows = Rows()
      let done = Gate()
      try DatabaseActor.thread.perform {
        order.log("before")
        Task.immediate { @DatabaseActor in
          rows.insert("from a callback")
          order.log("inside on \(DatabaseActor.thread.isCurrent ? "its thread" : "elsewhere")")
        }
        order.log("after")
        done.open()
      }
      #expect(done.wait())
      #expect(order.all == ["before", "inside on its thread", "after"])
      #expect(await rows.rows == ["from a callback"])
    }

    @Test(
      "75. What Swift 6.3 does not allow: a nonisolated callback cannot call a global actor's code synchronously (the docs quote these errors)"
    )
    func test_75_globalActorLimits() throws {
      let (status, output) = try typecheckClient(
        """
        import RunLoopKit
        @globalActor actor DB { static let shared = DB() }
        @DB func bump() {}
        func fromCallback() { DB.shared.assumeIsolated { _ in bump() } }
        func generic<A: GlobalActor>(_ actor: A.Type, _ body: @A () -> Void) {}
        """)
      #expect(status != 0, "the client compiled: \(output)")
      #expect(
        output.contains(
          "call to global actor 'DB'-isolated global function 'bump()' in a synchronous "
            + "actor-isolated context"), "\(output)")
      #expect(output.contains("unknown attribute 'A'"), "\(output)")
    }
  }
}
