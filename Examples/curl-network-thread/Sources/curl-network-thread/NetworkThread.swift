import CCurl
import Dispatch
import Glibc
import RunLoopKit
import Synchronization

/// The two ways the example runs the same transfers on the same thread.
struct NetworkThread {
  let thread: ResidentThread
  static let maxHostConnections = 8

  /// The RunLoopKit way: a `CurlMulti` on the thread's loop, which keeps serving other work
  /// meanwhile. Returns each transfer's outcome, in plan order, and the thread's CPU time.
  func runOnLoop(_ requests: [Request]) throws -> Run {
    let finished = DispatchSemaphore(value: 0)
    let answer = Mutex<Result<Run, any Error>?>(nil)
    let before = thread.loop.metrics
    defer {
      let after = thread.loop.metrics
      if CommandLine.arguments.contains("--verbose") {
        print(
          "  loop: \(after.passes - before.passes) passes, \(after.waits - before.waits) waits, \(after.sourcesHandled - before.sourcesHandled) sources handled, \(after.timersFired - before.timersFired) timers fired"
        )
      }
    }
    try thread.perform {
      let start = threadCPUTime()
      do {
        let multi = try CurlMulti(
          loop: thread.assumeIsolated(), maxHostConnections: Self.maxHostConnections)
        var outcomes = [Outcome?](repeating: nil, count: requests.count)
        var left = requests.count
        var index: [ObjectIdentifier: Int] = [:]
        multi.onFinish = { transfer in
          outcomes[index[ObjectIdentifier(transfer)]!] = transfer.outcome
          left -= 1
          if left == 0 {
            multi.invalidate()
            let cpu = threadCPUTime() - start
            let run = Run(outcomes: outcomes.map { $0! }, cpu: cpu, inCurl: multi.timeInCurl)
            answer.withLock { $0 = .success(run) }
            finished.signal()
          }
        }
        for (position, request) in requests.enumerated() {
          let transfer = Transfer(
            url: request.url, timeoutMilliseconds: request.timeoutMilliseconds)
          index[ObjectIdentifier(transfer)] = position
          try multi.add(transfer)
        }
      } catch {
        answer.withLock { $0 = .failure(error) }
        finished.signal()
      }
    }
    guard finished.wait(timeout: .now() + .seconds(120)) == .success else {
      throw FixtureError("the transfers on the loop did not finish within 120 s")
    }
    return try answer.withLock { $0! }.get()
  }

  /// The same program on a bare epoll loop in C (`ccurl_run_on_epoll`), run as one block on
  /// the same thread (its loop idles meanwhile).
  func runOnBareEpoll(_ requests: [Request]) throws -> Run {
    try thread.performAndWait { () throws -> Run in
      let urls = requests.map { strdup($0.url)! }
      defer { for url in urls { free(url) } }
      var transfers = zip(requests, urls).map { request, url in
        ccurl_transfer(
          url: url, timeout_ms: request.timeoutMilliseconds, bytes: 0, result: 0, status: 0)
      }
      var inCurl: Int64 = 0
      let nanoseconds = ccurl_run_on_epoll(
        &transfers, Int32(transfers.count), Self.maxHostConnections, &inCurl)
      guard nanoseconds >= 0 else { throw FixtureError("the C epoll loop failed: errno \(errno)") }
      let outcomes = zip(requests, transfers).map { request, transfer in
        Outcome(
          url: request.url, bytes: Int(transfer.bytes), result: Int(transfer.result),
          status: transfer.status)
      }
      return Run(outcomes: outcomes, cpu: .nanoseconds(nanoseconds), inCurl: .nanoseconds(inCurl))
    }
  }
}

/// One run of the plan: each transfer's outcome in plan order, the thread's CPU time, and the
/// part of it spent inside curl.
struct Run: Sendable {
  var outcomes: [Outcome]
  var cpu: Duration
  var inCurl: Duration
  /// The event loop's own share: waiting, dispatching, bookkeeping.
  var outsideCurl: Duration { cpu - inCurl }
}

/// CPU time the calling thread has used.
func threadCPUTime() -> Duration {
  var now = timespec()
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
  return .seconds(now.tv_sec) + .nanoseconds(now.tv_nsec)
}
