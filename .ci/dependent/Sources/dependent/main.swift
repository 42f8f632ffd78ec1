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
