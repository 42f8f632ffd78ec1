/// A fixed set of resident threads that share out work: `next()` hands them out round-robin,
/// `any()` prefers the one the caller is already on, and `executor` spreads Swift concurrency
/// jobs over all of them.
///
/// CF has no such type (a run loop belongs to one thread, and CF leaves pooling to the caller).
/// It mirrors SwiftNIO's `MultiThreadedEventLoopGroup`: `next()` and `any()` mean what they mean
/// there, and so does the rule that a group's own thread must not wait for the group to end.
/// Where it differs:
/// - the threads are plain `ResidentThread`s, with everything they offer (`perform`,
///   `performAndWait`, `run`, timers and sources on their loops, an executor each);
/// - `stop()` is synchronous and asks no callback: every thread finishes every block posted
///   to it before the call, and later posts throw `.stopped` instead of failing a future;
///   `join()` then waits until every thread is gone;
/// - `join()` on one of the group's own threads throws `.calledOnOwnThread` (NIO's
///   `syncShutdownGracefully()` traps there);
/// - dropping the last reference stops and joins the threads (NIO leaks them unless it was
///   shut down): see `deinit`;
/// - the names are yours, `"<name>-0"`, `"<name>-1"`, …, checked against Linux's 15-byte
///   limit before any thread starts (NIO names its threads `NIO-ELT-<group>-#<loop>`);
/// - per-thread settings NIO leaves to a thread initializer: stack size, niceness, CPU
///   affinity (per index), and the loops' wait policy.
///
/// Posting from several threads through `next()` spreads the blocks over the threads; each
/// thread still runs its own blocks in the order each poster posted them, but blocks that went
/// to different threads run in parallel, in no order between them.
public final class ResidentThreadGroup: Sendable {
  /// The group's threads, in index order: `threads[i]` is named `"<name>-<i>"`.
  public let threads: [ResidentThread]

  /// A task executor that spreads jobs over the group's threads, round-robin (sharing
  /// `next()`'s turn): pass it to `withTaskExecutorPreference(_:operation:)` or
  /// `Task(executorPreference:)`. See `ResidentThreadGroup.Executor` for what it does once
  /// the threads stop.
  public let executor: ResidentThreadGroup.Executor

  /// Starts `count` resident threads named `"<name>-0"` … `"<name>-<count-1>"` and returns once
  /// every one of them runs its loop.
  ///
  /// Every thread's configuration is checked before the first thread starts; if a thread then
  /// fails to start (the kernel refuses it), the ones already started are stopped and joined
  /// and the error is rethrown, so a failed `init` leaves no thread behind.
  ///
  /// - Parameters:
  ///   - count: how many threads; at least 1.
  ///   - name: the threads' common name; the longest suffixed name, `"<name>-<count-1>"`, must
  ///     fit Linux's 15 bytes.
  ///   - stackSize: each thread's stack, as for `ResidentThread`; `nil` = default.
  ///   - niceness: each thread's nice value (-20...19), as for `ResidentThread`.
  ///   - cpuAffinity: called once per thread with its index, during `init`: the CPUs that
  ///     thread may run on, or nil to leave it unpinned. `nil` = no thread pinned.
  ///   - waitPolicy: how each thread's loop waits when idle (default: sleep at once).
  /// - Throws: `LoopError.invalidArgument` for a count below 1, a suffixed name over 15 bytes,
  ///   a bad stack size, niceness or CPU set — before any thread is created — or `.system`
  ///   if the kernel refuses a thread.
  public init(
    count: Int, name: String, stackSize: Int? = nil, niceness: Int32? = nil,
    cpuAffinity: ((Int) -> Set<Int>?)? = nil, waitPolicy: Loop.WaitPolicy = .sleep
  ) throws(LoopError) {
    let configurations = try ResidentThreadGroup.configurations(
      count: count, name: name, stackSize: stackSize, niceness: niceness,
      cpuAffinity: cpuAffinity, waitPolicy: waitPolicy)
    var started: [ResidentThread] = []
    started.reserveCapacity(count)
    for configuration in configurations {
      do throws(LoopError) {
        started.append(try ResidentThread(configuration: configuration))
      } catch {
        // The caller is none of these threads, so joining them cannot wait for itself.
        for thread in started { thread.stop() }
        for thread in started { thread.core.join() }
        throw error
      }
    }
    threads = started
    executor = Executor(groupName: name, loops: started.map(\.loop))
  }

  /// Checks the group's own rules (count, suffixed names), then builds and checks every
  /// thread's configuration, all before any thread exists.
  private static func configurations(
    count: Int, name: String, stackSize: Int?, niceness: Int32?,
    cpuAffinity: ((Int) -> Set<Int>?)?, waitPolicy: Loop.WaitPolicy
  ) throws(LoopError) -> [ThreadConfiguration] {
    guard count >= 1 else {
      throw .invalidArgument(
        name: "thread count", value: "\(count)", reason: "a group needs at least one thread")
    }
    let longest = "\(name)-\(count - 1)"
    let bytes = longest.utf8.count
    let limit = ThreadConfiguration.maximumNameBytes
    guard bytes <= limit else {
      throw .invalidArgument(
        name: "thread name", value: "\"\(longest)\"",
        reason:
          "the suffixed name of the group's last thread is \(bytes) bytes, \(bytes - limit) "
          + "over the \(limit) Linux allows; shorten \"\(name)\" or use fewer threads")
    }
    var configurations: [ThreadConfiguration] = []
    configurations.reserveCapacity(count)
    for index in 0..<count {
      configurations.append(
        try ThreadConfiguration(
          name: "\(name)-\(index)", stackSize: stackSize, niceness: niceness,
          cpuAffinity: cpuAffinity?(index), waitPolicy: waitPolicy))
    }
    return configurations
  }

  /// Stops every thread (`stop()`) and waits for them all to go, unless the last reference
  /// went away on one of the group's own threads: there it waits for none of them (a sibling
  /// might be waiting for this very thread, in `performAndWait`), and every thread is
  /// detached instead, to finish the work posted before this and exit on its own. Either way
  /// no thread outlives its work, even when someone else still holds one of the
  /// `ResidentThread`s.
  deinit {
    for thread in threads { thread.core.stop() }
    if threads.contains(where: { $0.core.isOwnPthread }) {
      for thread in threads { thread.core.detach() }
    } else {
      for thread in threads { thread.core.join() }
    }
  }

  /// How many threads the group has (`threads.count`).
  public var count: Int { threads.count }

  /// The next thread in turn: `threads[0]`, `threads[1]`, … then `threads[0]` again. Lock-free
  /// (one relaxed atomic add) and safe from any thread; the executor takes its turns from the
  /// same counter.
  public func next() -> ResidentThread { threads[executor.nextIndex()] }

  /// The group's thread the caller is running on, when it is one of them (so work stays on
  /// the thread that already has its data, with no hop); `next()` anywhere else. As NIO's
  /// `EventLoopGroup.any()`.
  public func any() -> ResidentThread {
    if let current = ResidentThreadCore.currentIdentity,
      let own = threads.first(where: { $0.core.identity == current })
    {
      return own
    }
    return next()
  }

  /// Stops every thread: each one finishes every block posted to it before this call, then
  /// ends; from now on posts to any of them throw `.stopped`. Idempotent, from any thread (on
  /// one of the group's threads, that thread stops after its current block). Delayed blocks
  /// (`perform(after:)`) not yet run are abandoned, as `ResidentThread.stop()` says.
  public func stop() {
    for thread in threads { thread.stop() }
  }

  /// Waits until every thread is gone (its loop torn down, its descriptors closed). Call
  /// `stop()` first, or it waits until someone does.
  /// - Throws: `.calledOnOwnThread`, naming the thread, when called on one of the group's own
  ///   threads (it would wait for itself); nothing is waited for then.
  public func join() throws(LoopError) {
    if let own = threads.first(where: \.isCurrent) {
      throw .calledOnOwnThread(operation: "join()", thread: own.name)
    }
    for thread in threads { try thread.join() }
  }
}
