import CRunLoopShims
import Dispatch
import Foundation
import RunLoopKit

/// Why a scenario could not finish.
public struct DemoError: Error, CustomStringConvertible {
  public let description: String
  init(_ description: String) { self.description = description }
}

/// Polls `condition` until it holds; throws after `seconds` so a demo never hangs.
func waitFor(_ what: String, seconds: Double = 5, _ condition: () -> Bool) throws {
  let deadline = LoopClock.Instant.now.advanced(by: .milliseconds(Int64(seconds * 1000)))
  while !condition() {
    guard LoopClock.Instant.now < deadline else {
      throw DemoError("gave up after \(seconds) s waiting for \(what)")
    }
    usleep(200)
  }
}

/// Milliseconds since a tracer's origin, for notes that line up with its timeline.
func stamp(_ tracer: LoopTracer, _ instant: LoopClock.Instant = .now) -> String {
  LoopTracer.format(tracer.origin.duration(to: instant))
}

/// A thread that runs one body and hands back its result when joined.
final class DemoThread<Value: Sendable>: Sendable {
  private let finished = DispatchSemaphore(value: 0)
  private let outcome = Locked<Result<Value, any Error>?>(nil)

  init(name: String, _ body: @escaping @Sendable () throws -> Value) {
    let thread = Thread { [self] in
      // Foundation does not pass `name` to the kernel on Linux: set it, so that the loop,
      // `top -H` and the Chrome trace's track know the thread as `name`.
      _ = crl_set_thread_name(name)
      let result = Result { try body() }
      outcome.value = result
      finished.signal()
    }
    thread.name = name
    thread.start()
  }

  /// Waits for the body to return (at most `seconds`) and returns what it returned.
  func join(seconds: Double = 10) throws -> Value {
    guard finished.wait(timeout: .now() + seconds) == .success else {
      throw DemoError("a demo thread did not finish within \(seconds) s")
    }
    return try outcome.value!.get()
  }
}

/// A value shared between threads behind a lock. An `NSLock` (a pthread mutex) rather than
/// `Synchronization.Mutex`, whose futex ThreadSanitizer cannot see.
final class Locked<Value>: @unchecked Sendable {  // `stored` is only touched under `lock`
  private let lock = NSLock()
  private var stored: Value

  init(_ value: Value) { stored = value }

  var value: Value {
    get { lock.withLock { stored } }
    set { lock.withLock { stored = newValue } }
  }

  func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
    try lock.withLock { try body(&stored) }
  }
}

extension [LoopTracer.Event] {
  /// How many times the timer labelled `name` fired in these events.
  func fires(of name: String) -> Int {
    filter {
      if case .timer(name, _) = $0.kind { return true }
      return false
    }.count
  }
}
