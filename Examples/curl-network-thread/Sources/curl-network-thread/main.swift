import CCurl
import Glibc
import RunLoopKit

// A network thread the Linux way: 200 GETs through libcurl's multi_socket interface on a
// resident thread's loop, against a local server started here (bodies of 1 KB to 4 MB, refused
// connections, a server that never answers). Every outcome is checked exactly. Then rounds of
// the same program on the loop and on a bare epoll loop in C, alternating on the same thread,
// compare their CPU time. Exits with status 1 if any check failed.
//
//   curl-network-thread [--rounds N] [--only loop|epoll] [--verbose]
//   (N rounds of each way for the CPU comparison, default 9; --only: that way alone, for a
//   profiler; --verbose: each round, and the loop's passes)
var failures: [String] = []
let arguments = CommandLine.arguments
let rounds = arguments.firstIndex(of: "--rounds").flatMap { Int(arguments[$0 + 1]) } ?? 9
let only = arguments.firstIndex(of: "--only").map { arguments[$0 + 1] }

guard curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK else {
  fatalError("curl_global_init failed")
}
let fixture = try HTTPFixture()
let plan = Request.plan(count: 200, serverPort: fixture.port, refusedPort: fixture.refusedPort)
let network = NetworkThread(thread: try ResidentThread(name: "network"))

@MainActor func check(_ outcomes: [Outcome], _ way: String) {
  for (request, outcome) in zip(plan, outcomes) {
    if let mismatch = request.mismatch(outcome) { failures.append("\(way): \(mismatch)") }
  }
  let bytes = outcomes.reduce(0) { $0 + $1.bytes }
  let expected = plan.reduce(0) {
    if case .body(let size) = $1.expectation { return $0 + size } else { return $0 }
  }
  if bytes != expected { failures.append("\(way): \(bytes) bytes in all, expected \(expected)") }
}

let first = only == "epoll" ? try network.runOnBareEpoll(plan) : try network.runOnLoop(plan)
check(first.outcomes, "on the loop")
let bodies = plan.filter { if case .body = $0.expectation { true } else { false } }.count
print(
  "on the loop: \(first.outcomes.count) transfers, \(bodies) bodies with exact byte counts, "
    + "\(plan.count - bodies) refused or timed out as planned, \(first.outcomes.reduce(0) { $0 + $1.bytes }) bytes"
)

var ratios: [Double] = []
var loopCPU: [Duration] = []
var epollCPU: [Duration] = []
var loopOwn: [Duration] = []
var epollOwn: [Duration] = []
for _ in 0..<rounds {
  let onEpoll = only == "loop" ? first : try network.runOnBareEpoll(plan)
  check(onEpoll.outcomes, "on bare epoll")
  let onLoop = only == "epoll" ? first : try network.runOnLoop(plan)
  check(onLoop.outcomes, "on the loop")
  loopCPU.append(onLoop.cpu)
  epollCPU.append(onEpoll.cpu)
  loopOwn.append(onLoop.outsideCurl)
  epollOwn.append(onEpoll.outsideCurl)
  ratios.append(seconds(onLoop.cpu) / seconds(onEpoll.cpu))
  if arguments.contains("--verbose") {
    print(
      "  round: loop \(onLoop.cpu) (outside curl \(onLoop.outsideCurl)), bare epoll \(onEpoll.cpu) "
        + "(outside curl \(onEpoll.outsideCurl)), ratio \(ratios.last!)")
  }
}
network.thread.stop()
try network.thread.join()
fixture.stop()
curl_global_cleanup()

func seconds(_ duration: Duration) -> Double {
  Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
}
func median<T: Comparable>(_ values: [T]) -> T { values.sorted()[values.count / 2] }
if rounds > 0 {
  print(
    "CPU of the network thread, median of \(rounds) rounds of each, alternating: loop \(median(loopCPU)), "
      + "bare epoll in C \(median(epollCPU)); loop / epoll, median of per-round ratios: \(median(ratios))"
  )
  print(
    "  outside curl_multi_socket_action (the event loop's own work), median per run: loop \(median(loopOwn)), bare epoll \(median(epollOwn))"
  )
}
for failure in failures.prefix(20) { print("FAILED: \(failure)") }
print(
  failures.isEmpty
    ? "curl-network-thread: all checks passed"
    : "curl-network-thread: \(failures.count) checks failed")
exit(failures.isEmpty ? 0 : 1)
