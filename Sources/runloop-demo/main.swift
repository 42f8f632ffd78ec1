// runloop-demo: a loop that explains itself. It runs the main thread's loop for a few
// passes with an observer of every activity, a repeating timer, a manual source signalled
// from another thread, and a pipe watched by a descriptor source, and prints each activity
// and callback as it happens.
import Dispatch
import Glibc
import RunLoopKit
import Synchronization

let start = LoopClock.Instant.now

/// Prints a line stamped with the milliseconds since the demo started.
@Sendable func say(_ text: String) {
  let micros = start.duration(to: .now).saturatedMicroseconds
  let whole = "\(micros / 1000)"
  let fraction = "\(micros % 1000)"
  let stamp =
    String(repeating: " ", count: max(0, 4 - whole.count)) + whole + "."
    + String(repeating: "0", count: 3 - fraction.count) + fraction
  print("[\(stamp) ms] \(text)")
  fflush(nil)
}

extension Duration {
  var saturatedMicroseconds: Int64 {
    components.seconds * 1_000_000 + components.attoseconds / 1_000_000_000_000
  }
}

let loop = Loop.current
print("RunLoopKit demo — the main thread's loop, one line per thing that happens.")
print("Loop.current === Loop.main on the main thread: \(loop === Loop.main)\n")

// 1. An observer for every activity: the loop narrating its own iteration.
let observer = LoopObserver(activities: .all) { _, activity in
  switch activity {
  case .entry: say("observer: entry — the run begins")
  case .beforeTimers: say("observer: beforeTimers")
  case .beforeSources: say("observer: beforeSources")
  case .beforeWaiting: say("observer: beforeWaiting — nothing to do, going to sleep in epoll_wait")
  case .afterWaiting: say("observer: afterWaiting — something woke the loop")
  case .exit: say("observer: exit — the run is over")
  default: say("observer: \(activity)")
  }
}
try loop.add(observer, to: .default)

// 2. A timer every 40 ms that stops itself after three fires.
let fires = Counter()
let timer = try LoopTimer(after: .milliseconds(40), repeating: .milliseconds(40)) { timer in
  let count = fires.increment()
  say("  timer fired (\(count) of 3)\(count == 3 ? " — invalidating itself" : "")")
  if count == 3 { timer.invalidate() }
}
try loop.add(timer, to: .default)

// 3. A manual source (CF's source0): signalling alone would not wake the loop, so the
//    signalling thread also calls wakeUp().
let manual = ManualSource(
  schedule: { _, mode in say("manual source scheduled in mode \(mode)") },
  cancel: { _, mode in say("manual source cancelled in mode \(mode)") },
  perform: { say("  manual source performed on the loop's thread") }
)
try loop.add(manual, to: .default)

// 4. A descriptor source (CF's source1) on a pipe: data written by another thread wakes the loop.
var fds: [Int32] = [0, 0]
guard pipe(&fds) == 0 else { fatalError("pipe() failed") }
let (readEnd, writeEnd) = (fds[0], fds[1])
let pipeSource = DescriptorSource(fileDescriptor: readEnd) { source, events in
  var buffer = [UInt8](repeating: 0, count: 64)
  let count = read(readEnd, &buffer, buffer.count)
  let text = String(decoding: buffer.prefix(max(count, 0)), as: UTF8.self)
  say("  pipe is \(events): read \"\(text)\"")
}
try loop.add(pipeSource, to: .default)

// Another thread pokes the loop while it sleeps.
DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(60)) {
  say("(helper thread) signal() + wakeUp() the manual source")
  manual.signal()
  loop.wakeUp()
}
DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(100)) {
  say("(helper thread) write \"hello\" into the pipe")
  _ = "hello".withCString { write(writeEnd, $0, 5) }
}
DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(150)) {
  say("(helper thread) perform { … } a block, which wakes the loop")
  try? loop.perform { say("  block performed on the loop's thread") }
}

say("run(for: 200 ms) in the default mode")
let result = loop.run(for: .milliseconds(200))
say("run returned .\(result)\n")

print("The loop's state afterwards (like CFShow(CFRunLoopGetCurrent())):")
print(loop.debugDescription)
manual.invalidate()
pipeSource.invalidate()
close(readEnd)
close(writeEnd)

/// A counter the timer's handler can share with the demo.
final class Counter: Sendable {
  private let value = Atomic(0)
  func increment() -> Int { value.add(1, ordering: .relaxed).newValue }
}
