import Glibc

/// What the example saw, and the first thing that was not as it should be. The example exits
/// with status 1 when any check failed, so CI fails with it.
struct Checks {
  private(set) var failures: [String] = []

  mutating func expect(_ condition: Bool, _ what: @autoclosure () -> String) {
    if !condition { failures.append(what()) }
  }
}

/// CPU time this process has used, user and system together.
func processCPUTime() -> Duration {
  var usage = rusage()
  getrusage(RUSAGE_SELF.rawValue, &usage)
  let user = Duration.seconds(usage.ru_utime.tv_sec) + .microseconds(usage.ru_utime.tv_usec)
  let system = Duration.seconds(usage.ru_stime.tv_sec) + .microseconds(usage.ru_stime.tv_usec)
  return user + system
}

/// Milliseconds, with one decimal, for the report.
func milliseconds(_ duration: Duration) -> String {
  let (seconds, attoseconds) = duration.components
  let tenths = (seconds * 10_000 + attoseconds / 100_000_000_000_000)
  return "\(tenths / 10).\(abs(tenths % 10)) ms"
}
