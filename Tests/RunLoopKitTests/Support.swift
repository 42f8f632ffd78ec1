import CRunLoopShims
import Foundation
import Glibc
import Synchronization
import Testing

@testable import RunLoopKit

/// Every test runs its loops on threads it creates and joins, and the suites run one at a
/// time, so fd counts and timings are not disturbed by other tests.
@Suite(.serialized) struct RunLoopKitTests {}

/// A thread-safe, ordered log of what happened, for asserting order and counts.
final class Recorder: @unchecked Sendable {  // `entries` is guarded by `lock`
  private let lock = NSLock()
  private var entries: [String] = []

  func log(_ entry: String) { lock.withLock { entries.append(entry) } }
  var all: [String] { lock.withLock { entries } }
  func count(of entry: String) -> Int { all.filter { $0 == entry }.count }
  func clear() { lock.withLock { entries.removeAll() } }
}

/// A value set on one thread and read on another.
final class Box<Value: Sendable>: @unchecked Sendable {  // `value` is guarded by `lock`
  private let lock = NSLock()
  private var stored: Value
  init(_ value: Value) { stored = value }
  var value: Value {
    get { lock.withLock { stored } }
    set { lock.withLock { stored = newValue } }
  }
}

/// A raw pthread, so a test can join it and be sure its TLS destructors (loop teardown) ran.
final class TestThread: @unchecked Sendable {  // handle: set before sharing
  private var handle = pthread_t()
  private final class Start {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
  }

  init(_ body: @escaping @Sendable () -> Void) {
    let start = Unmanaged.passRetained(Start(body)).toOpaque()
    let result = pthread_create(
      &handle, nil,
      { raw in
        let start = Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue()
        start.body()
        return nil
      }, start)
    precondition(result == 0)
  }

  func join() { pthread_join(handle, nil) }
}

/// Runs `body` on a fresh thread with that thread's loop, waits for the thread to exit, and
/// returns what the body returned.
func onLoopThread<T: Sendable>(_ body: @escaping @Sendable (Loop) throws -> T) throws -> T {
  let result = Box<Result<T, any Error>?>(nil)
  let thread = TestThread {
    result.value = Result { try body(Loop.current) }
  }
  thread.join()
  return try result.value!.get()
}

/// Starts a loop thread and hands back its loop once the thread is ready; `body` runs the loop.
final class LoopThread: @unchecked Sendable {  // `thread` is written before `loop` is published
  let loop: Loop
  private var thread: TestThread?

  init(_ body: @escaping @Sendable (Loop) -> Void) {
    let ready = DispatchSemaphore(value: 0)
    let box = Box<Loop?>(nil)
    let go = DispatchSemaphore(value: 0)
    thread = TestThread {
      box.value = Loop.current
      ready.signal()
      go.wait()
      body(Loop.current)
    }
    ready.wait()
    loop = box.value!
    setUp = go
  }

  private var setUp: DispatchSemaphore
  /// Lets the thread's body run (set up the loop from the test thread first if needed).
  func start() { setUp.signal() }
  func join() { thread?.join() }
}

/// Polls `condition` every millisecond until it holds or `seconds` pass.
@discardableResult
func waitUntil(seconds: Double = 5, _ condition: () -> Bool) -> Bool {
  let deadline = Date().addingTimeInterval(seconds)
  while Date() < deadline {
    if condition() { return true }
    usleep(1000)
  }
  return condition()
}

func elapsed(since start: LoopClock.Instant) -> Duration { start.duration(to: .now) }

/// An observer that logs every activity it sees, by name.
func activityLogger(_ recorder: Recorder, order: Int = 0) -> LoopObserver {
  LoopObserver(activities: .all, order: order) { _, activity in recorder.log(activity.description) }
}

func makePipe() -> (read: Int32, write: Int32) {
  var fds: [Int32] = [0, 0]
  precondition(pipe(&fds) == 0)
  for fd in fds { _ = fcntl(fd, F_SETFL, O_NONBLOCK) }
  return (fds[0], fds[1])
}

func writeByte(_ fd: Int32) {
  var byte: UInt8 = 1
  _ = write(fd, &byte, 1)
}

func drain(_ fd: Int32) {
  var buffer = [UInt8](repeating: 0, count: 256)
  while read(fd, &buffer, 256) > 0 {}
}

func isOpen(_ fd: Int32) -> Bool { fcntl(fd, F_GETFD) != -1 }

func openDescriptorCount() -> Int {
  (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1
}

/// The process's open descriptor numbers (as names in /proc/self/fd).
func openDescriptors() throws -> Set<String> {
  Set(try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))
}

/// Runs `body` with a fresh non-blocking pipe and closes both ends afterwards.
func withPipe<T>(_ body: ((read: Int32, write: Int32)) throws -> T) rethrows -> T {
  let pipe = makePipe()
  defer {
    close(pipe.read)
    close(pipe.write)
  }
  return try body(pipe)
}

/// Lines 13 and 43: a loop with one idle source runs for 600 ms and is woken once while it
/// sleeps. Returns the run's result and every activity an observer of `.all` saw.
func runWithOneWakeUp() throws -> (result: Loop.RunResult?, trace: [String]) {
  let recorder = Recorder()
  let result = Box<Loop.RunResult?>(nil)
  let thread = LoopThread { loop in
    result.value = loop.run(for: .milliseconds(600))
  }
  try thread.loop.add(ManualSource {}, to: .default)
  try thread.loop.add(activityLogger(recorder), to: .default)
  thread.start()
  #expect(waitUntil { thread.loop.isWaiting })
  thread.loop.wakeUp()
  thread.join()
  return (result.value, recorder.all)
}

/// The activities of a run that slept, was woken once, slept again and timed out.
let wokenOnceTrace = [
  "entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting",
  "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "exit",
]

/// Watches `fd` on a fresh loop for 200 ms and returns what its handler was told and how many
/// passes the loop made: a loop spinning on a dead descriptor would make thousands.
func eventsAndPasses(
  fileDescriptor fd: Int32, interest: DescriptorSource.Events
) throws -> (events: [String], passes: Int) {
  let recorder = Recorder()
  let passes = try onLoopThread { loop in
    let source = DescriptorSource(fileDescriptor: fd, interest: interest) { _, events in
      recorder.log("\(events)")
    }
    try loop.add(source, to: .default)
    let passes = Box(0)
    try loop.add(
      LoopObserver(activities: .beforeSources) { _, _ in passes.value += 1 }, to: .default)
    loop.run(for: .milliseconds(200))
    return passes.value
  }
  return (recorder.all, passes)
}

extension LoopTracer.Kind {
  /// The kind with a timer's lateness zeroed, so traces compare without timing.
  var withoutLateness: LoopTracer.Kind {
    if case .timer(let name, _) = self { return .timer(name, lateness: .zero) }
    return self
  }
}

extension [LoopTracer.Event] {
  /// What ended each recorded sleep, in order.
  var sleepCauses: [[LoopTracer.WakeCause]] {
    compactMap { event in
      if case .slept(let causes) = event.kind { return causes }
      return nil
    }
  }
}

/// A pipe whose read end is watched by a descriptor source labelled "pipe" on `loop`; the
/// source drains it and stops the loop. The pipe is closed after `body`.
func withStoppingPipe<T>(
  on loop: Loop, _ body: ((read: Int32, write: Int32), DescriptorSource) throws -> T
) throws -> T {
  try withPipe { pipe in
    let source = DescriptorSource(fileDescriptor: pipe.read, label: "pipe") { _, _ in
      drain(pipe.read)
      Loop.current.stop()
    }
    try loop.add(source, to: .default)
    defer { source.invalidate() }
    return try body(pipe, source)
  }
}

/// A one-way signal between threads whose wait is bounded, so a test whose interleaving goes
/// wrong fails instead of hanging the suite.
final class Gate: Sendable {
  private let semaphore = DispatchSemaphore(value: 0)

  func open() { semaphore.signal() }

  /// Waits until the gate is opened, at most `seconds`; false if it never was.
  @discardableResult
  func wait(seconds: Double = 10) -> Bool {
    semaphore.wait(timeout: .now() + seconds) == .success
  }
}

/// Holds the next thread that reaches `point` for `object` there until the returned gate
/// `release` is opened; `arrived` opens when it gets there.
func holdAt(
  _ point: TestPausePoint, for object: AnyObject
) -> (arrived: Gate, release: Gate) {
  let arrived = Gate()
  let release = Gate()
  TestPausePoint.arm(point, for: object) {
    arrived.open()
    release.wait()
  }
  return (arrived, release)
}

/// A count shared between threads.
final class Counter: Sendable {
  private let atomic = Atomic<Int>(0)

  /// Adds one; returns the new count.
  @discardableResult
  func increment() -> Int { atomic.add(1, ordering: .relaxed).newValue }
  var value: Int { atomic.load(ordering: .relaxed) }
}
