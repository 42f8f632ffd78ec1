// A program whose main executor is Loop.main (RunLoopKitExecutors' LoopExecutorFactory).
// Built with `-Xfrontend -disable-availability-checking` (see Package.swift and the DocC article SwiftConcurrency.md):
// without it the compiler ignores the typealias below, and `requireInstalled()` says so.
import Dispatch
import Glibc
import RunLoopKit
import RunLoopKitExecutors

typealias DefaultExecutorFactory = LoopExecutorFactory

@main
struct LoopMainExample {
  static func main() async throws {
    if CommandLine.arguments.contains("--check-only") {
      print("factory installed: \(LoopExecutorFactory.isInstalled)")
      return
    }
    LoopExecutorFactory.requireInstalled()
    report("main task")
    if CommandLine.arguments.contains("--nested-run") { return await nestedRunInMainActorJob() }
    if CommandLine.arguments.contains("--stray-stop") { return await strayStops() }
    if CommandLine.arguments.contains("--throw") { throw ExampleError(code: 3) }

    // @MainActor code: the main actor is Loop.main's executor.
    await MainActor.run { report("@MainActor") }

    // Task.sleep from main-actor code, timed by Loop.main's timers (the sleep prefers the main
    // executor; see SwiftConcurrency.md on Task.sleep).
    let firedBefore = Loop.main.metrics.timersFired
    try await withTaskExecutorPreference(Loop.main.executor) {
      try await Task.sleep(for: .milliseconds(20))
    }
    report("Task.sleep(20 ms), \(Loop.main.metrics.timersFired - firedBefore) Loop.main timer")

    // A LoopTimer and a descriptor source on Loop.main, and a DispatchQueue.main block.
    try await waitForTimer()
    try await waitForDescriptor()
    await withCheckedContinuation { continuation in
      DispatchQueue.main.async {
        report("DispatchQueue.main")
        continuation.resume()
      }
    }

    report("main returns")
  }

  static func waitForTimer() async throws {
    try await withCheckedThrowingContinuation {
      (continuation: CheckedContinuation<Void, any Error>) in
      do {
        let timer = try LoopTimer(label: "example timer", after: .milliseconds(10)) { _ in
          report("LoopTimer")
          continuation.resume()
        }
        try Loop.main.add(timer, to: .common)
      } catch {
        continuation.resume(throwing: error)
      }
    }
  }

  static func waitForDescriptor() async throws {
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else { throw ExampleError(code: 2) }
    let (readEnd, writeEnd) = (fds[0], fds[1])
    defer {
      close(readEnd)
      close(writeEnd)
    }
    try await withCheckedThrowingContinuation {
      (continuation: CheckedContinuation<Void, any Error>) in
      let source = DescriptorSource(fileDescriptor: readEnd, label: "pipe") { source, _ in
        var byte: UInt8 = 0
        _ = read(readEnd, &byte, 1)
        source.invalidate()
        report("DescriptorSource (byte \(byte) from another thread)")
        continuation.resume()
      }
      do {
        try Loop.main.add(source, to: .common)
      } catch {
        return continuation.resume(throwing: error)
      }
      // Written from a Dispatch worker: the main thread is asleep in Loop.main until it lands.
      DispatchQueue.global().async {
        var byte: UInt8 = 42
        _ = write(writeEnd, &byte, 1)
      }
    }
  }
}

// MARK: Corner cases the tests run (`--nested-run`, `--stray-stop`, `--throw`)

/// Main-actor state that one job holds `inout` across a nested run of `Loop.main`.
@MainActor var counter = 0

extension LoopMainExample {
  /// A main-actor job runs `Loop.main` nested while it holds `counter` for writing. Another
  /// main-actor job and a main-queue block, queued before the nested run, must wait until the
  /// first job returns (a serial executor runs one job at a time); a plain `perform` block
  /// runs inside the nested run.
  static func nestedRunInMainActorJob() async {
    await MainActor.run {
      Task { @MainActor in
        counter += 1
        report("second main-actor job, counter \(counter)")
      }
      DispatchQueue.main.async { report("main-queue block") }
      addAcrossNestedRun(&counter)
      report("first main-actor job ends, counter \(counter)")
    }
    // Both waiting pieces of work ran before this, which is queued behind them.
    await afterMainQueue()
    await MainActor.run { report("main returns, counter \(counter)") }
  }

  @MainActor static func addAcrossNestedRun(_ value: inout Int) {
    report("first main-actor job begins")
    do {
      try Loop.main.perform {
        report("plain block in the nested run")
        Loop.main.stop()
      }
    } catch {
      fatalError("perform on Loop.main failed: \(error)")
    }
    Loop.main.run()
    value += 10
  }

  /// `Loop.main.stop()` from a main-queue block and from a main-actor job end one run of the
  /// loop each; the program goes on until `main` returns.
  static func strayStops() async {
    DispatchQueue.main.async {
      report("Loop.main.stop() from DispatchQueue.main")
      Loop.main.stop()
    }
    await afterMainQueue()  // after that block, which is ahead in the main queue
    await MainActor.run {
      report("Loop.main.stop() from a main-actor job")
      Loop.main.stop()
    }
    await afterMainQueue()  // the loop turned again after that stop
    await MainActor.run { report("main returns") }
  }

  /// Returns once a main-queue block posted now has run: after every block posted before it.
  static func afterMainQueue() async {
    await withCheckedContinuation { continuation in
      DispatchQueue.main.async { continuation.resume() }
    }
  }
}

struct ExampleError: Error, CustomStringConvertible {
  let code: Int32
  var description: String { "example failure \(code)" }
}

/// One line per step: what ran, and whether it ran on the main thread inside Loop.main.
@Sendable func report(_ step: String) {
  let onMain = Loop.main.isCurrent ? "main thread" : "thread \(pthread_self())"
  let running = Loop.main.currentMode.map { "Loop.main running \($0)" } ?? "Loop.main not running"
  print("\(step): \(onMain), \(running)")
}
