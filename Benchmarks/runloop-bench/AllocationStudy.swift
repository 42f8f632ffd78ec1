import CBenchBaselines
import RunLoopKit
import RunLoopKitExecutors

/// Calls to the C allocator per executor job and per sleep on a loop, counted process-wide
/// by the bench's own malloc (`CBenchAllocations`) while nothing else runs: a task preferring
/// a resident thread's executor yields (each `Task.yield()` enqueues the task on the loop's
/// executor once), then sleeps with `loop.sleep` and with `Task.sleep`.
struct AllocationResult: Codable {
  let name: String
  let operations: Int
  let allocations: Int64
  /// Wall time per operation, for scale.
  let nanosecondsPerOperation: Double
  var allocationsPerOperation: Double { Double(allocations) / Double(operations) }
}

enum AllocationStudy {
  static func run(_ options: Options, progress: Progress) async throws -> [AllocationResult] {
    guard crb_allocations_countable() == 1 else {
      progress.note("allocations: not countable in a sanitizer build")
      return []
    }
    let jobs = options.quick ? 100_000 : 1_000_000
    let sleeps = options.quick ? 10_000 : 100_000
    let thread = try ResidentThread(name: "bench-alloc")
    defer {
      thread.stop()
      try? thread.join()
    }
    let loop = thread.loop
    // Warm up: the first jobs and sleeps grow the queues, heaps and batches they reuse after.
    _ = await count("warm-up", jobs / 10, on: thread) { _ in await Task.yield() }
    _ = await count("warm-up", sleeps / 10, on: thread) { _ in try? await loop.sleep(for: .zero) }
    _ = await count("warm-up", sleeps / 10, on: thread) { _ in try? await Task.sleep(for: .zero) }
    let results = [
      await count("executor job (Task.yield on a loop executor)", jobs, on: thread) { _ in
        await Task.yield()
      },
      await count("loop.sleep(for: .zero)", sleeps, on: thread) { _ in
        try? await loop.sleep(for: .zero)
      },
      await count("Task.sleep(for: .zero), loop executor", sleeps, on: thread) { _ in
        try? await Task.sleep(for: .zero)
      },
    ]
    progress.note("allocations")
    return results
  }

  /// Runs `body` `operations` times in a task preferring `thread`'s executor, counting every
  /// allocation in the process meanwhile.
  private static func count(
    _ name: String, _ operations: Int, on thread: ResidentThread,
    _ body: @escaping @Sendable (Int) async -> Void
  ) async -> AllocationResult {
    await withTaskExecutorPreference(thread.executor) {
      () async -> AllocationResult in
      crb_allocations_start()
      let start = crb_now_ns()
      for index in 0..<operations { await body(index) }
      let elapsed = crb_now_ns() - start
      let allocations = crb_allocations_stop()
      return AllocationResult(
        name: name, operations: operations, allocations: allocations,
        nanosecondsPerOperation: Double(elapsed) / Double(operations))
    }
  }
}
