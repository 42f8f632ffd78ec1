import RunLoopKit
import RunLoopKitExecutors

// Task.sleep on a resident thread's timer, without the main-executor flag. A nonisolated
// function: a closure written here in top-level code would be main-actor isolated and run on
// the main thread whatever executor it prefers.
func sleepOnLoop(of thread: ResidentThread) async -> Bool {
  await withTaskExecutorPreference(thread.executor) {
    try? await Task.sleep(for: .milliseconds(1))
    return thread.isCurrent
  }
}

let thread = try ResidentThread(name: "dependent")
let onThread = await sleepOnLoop(of: thread)
let timers = try thread.performAndWait { thread.loop.metrics.timersFired }
thread.stop()
try thread.join()
guard onThread, timers == 1 else {
  fatalError("Task.sleep did not run on the loop (on its thread: \(onThread), timers: \(timers))")
}
print(
  "RunLoopKitExecutors as a dependency: ok (Task.sleep was loop timer 1, resumed on its thread)")
