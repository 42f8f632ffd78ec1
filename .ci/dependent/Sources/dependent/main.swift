import RunLoopKit

// A timer on a resident thread, and its result sent back: enough to build, link and run.
let thread = try ResidentThread(name: "dependent")
let fired = try thread.performAndWait { () throws -> Bool in
  let timer = try LoopTimer(after: .milliseconds(1)) { _ in Loop.current.stop() }
  try Loop.current.add(timer, to: .default)
  Loop.current.run(in: .default, for: .seconds(5))
  return !timer.isValid  // a one-shot timer is invalid once it has fired
}
thread.stop()
try thread.join()
guard fired else { fatalError("the timer did not fire within 5 s") }
print("RunLoopKit as a dependency: ok")

// Without RunLoopKitExecutors (this program links RunLoopKit only), Task.sleep inside
// VirtualLoop.runTask is timed by Swift's global executor, in real time, and the virtual clock
// does not move for it; loop.sleep and the virtual clock's sleeps are virtual either way.
let virtual = VirtualLoop()
let realStart = ContinuousClock.now
let (afterTaskSleep, afterLoopSleep) = try virtual.runTask { () -> (Duration, Duration) in
  let loop = Loop.current
  try await Task.sleep(for: .milliseconds(30))
  let first = VirtualLoop.defaultStart.duration(to: loop.now)
  try await loop.sleep(for: .seconds(3600))
  return (first, VirtualLoop.defaultStart.duration(to: loop.now))
}
let realElapsed = realStart.duration(to: .now)
guard afterTaskSleep == .zero, afterLoopSleep == .seconds(3600), realElapsed >= .milliseconds(30)
else {
  fatalError(
    "runTask without RunLoopKitExecutors: Task.sleep moved the virtual clock to \(afterTaskSleep) "
      + "(expected zero), loop.sleep to \(afterLoopSleep), in \(realElapsed) of real time")
}
print("runTask without RunLoopKitExecutors: Task.sleep real (\(realElapsed)), loop.sleep virtual")
