import CRunLoopShims
import Glibc
import Synchronization

// Experimental toolchain interface: `swift_task_enqueueGlobal_hook`, a variable the Swift
// concurrency runtime exports and reads before every enqueue on the global (default)
// executor. Declared in the runtime's include/swift/Runtime/ConcurrencyHooks.def as a
// swiftcall function pointer taking the job and the original enqueue. Checked on Swift 6.3.1
// (swift-6.3.1-RELEASE, x86_64 Linux).

/// Counts the jobs Swift enqueues on its global executor from one chosen thread, for the
/// tests and the benchmark that check a loop's sleeps and jobs never pass through it. The
/// hook is process-wide and stays installed (it forwards every job to the runtime's own
/// enqueue); only jobs enqueued by the watched thread are counted, so tasks that other tests
/// run at the same time do not.
package enum GlobalJobCounter {
  typealias Original = @convention(thin) (UnownedJob) -> Void
  typealias Hook = @convention(thin) (UnownedJob, Original) -> Void

  private static let watchedThread = Atomic<Int32>(0)
  private static let counted = Atomic<Int>(0)
  private static let installed = Mutex(false)

  /// Installs the hook (once per process) and counts from now on the global jobs enqueued
  /// by the thread with kernel id `threadID`, or by every thread when it is nil (for a
  /// process that runs nothing else meanwhile, as the benchmark); returns false when the
  /// runtime exports no hook.
  package static func watch(threadID: pid_t?) -> Bool {
    guard install() else { return false }
    counted.store(0, ordering: .relaxed)
    watchedThread.store(threadID ?? everyThread, ordering: .releasing)
    return true
  }

  /// `watchedThread` when every thread counts (no kernel thread id is negative).
  private static let everyThread: Int32 = -1

  /// Jobs the watched thread has enqueued on the global executor since `watch`.
  package static var count: Int { counted.load(ordering: .acquiring) }

  /// Stops counting and returns the count.
  package static func stop() -> Int {
    watchedThread.store(0, ordering: .releasing)
    return counted.exchange(0, ordering: .acquiringAndReleasing)
  }

  private static func install() -> Bool {
    installed.withLock { done in
      if done { return true }
      guard let symbol = dlsym(dlopen(nil, RTLD_LAZY), "swift_task_enqueueGlobal_hook") else {
        return false
      }
      let hook = symbol.assumingMemoryBound(to: Hook?.self)
      // A hook installed before ours (none in this package) is not chained: the runtime
      // passes its own enqueue as `original`, which is what we forward to.
      hook.pointee = { job, original in
        let watched = GlobalJobCounter.watchedThread.load(ordering: .relaxed)
        if watched == GlobalJobCounter.everyThread || (watched != 0 && crl_gettid() == watched) {
          GlobalJobCounter.counted.add(1, ordering: .relaxed)
        }
        original(job)
      }
      done = true
      return true
    }
  }
}
