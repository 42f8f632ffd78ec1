/// Command-line options of runloop-bench.
struct Options {
  var quick = false
  var jsonPath: String?
  var svgPath: String?
  var tracePath: String?
  var only: Set<String>?

  static let usage = """
    usage: runloop-bench [--quick] [--json FILE] [--svg FILE] [--trace FILE]
                         [--only STUDY[,STUDY…]]
      --quick        a smoke run (fewer samples, shorter windows), about 20 s
      --json FILE    write every figure as JSON
      --svg FILE     draw the wake-latency distributions (CDFs, log-scale time), and with
                     the scaling study the manual-source curve next to it (FILE-scaling.svg)
      --trace FILE   after the studies (so it perturbs none), trace a short sample workload
                     (two resident threads: timer, port, manual source, observer, posts)
                     and write it as Chrome Trace Event JSON for ui.perfetto.dev
      --only LIST    run some studies: wake, spin, idle, throughput, group, threads,
                     timers, alloc, executors, isolated, virtual, tracer, scaling
    """

  static func parse(_ arguments: [String]) -> Options? {
    var options = Options()
    var rest = arguments[...]
    while let argument = rest.popFirst() {
      switch argument {
      case "--quick": options.quick = true
      case "--json":
        guard let path = rest.popFirst() else { return nil }
        options.jsonPath = path
      case "--svg":
        guard let path = rest.popFirst() else { return nil }
        options.svgPath = path
      case "--trace":
        guard let path = rest.popFirst() else { return nil }
        options.tracePath = path
      case "--only":
        guard let list = rest.popFirst() else { return nil }
        options.only = Set(list.split(separator: ",").map(String.init))
      case "-h", "--help": return nil
      default: return nil
      }
    }
    return options
  }

  func wants(_ study: String) -> Bool { only.map { $0.contains(study) } ?? true }

  /// Samples per wake-latency case and placement in each round.
  var wakeSamples: Int { quick ? 200 : 2_000 }
  /// Samples of the floor's reference batch taken right before each case's batch.
  var wakeReferenceSamples: Int { wakeSamples / 4 }
  /// Interleaved rounds of the wake-latency study.
  var wakeRounds: Int { quick ? 3 : 10 }
  /// Tasks per throughput case.
  var throughputTasks: Int { quick ? 50_000 : 1_000_000 }
  /// Tasks per case of the ResidentThreadGroup study (10 cases a round).
  var groupTasks: Int { quick ? 50_000 : 500_000 }
  /// Interleaved rounds of the ResidentThreadGroup study.
  var groupRounds: Int { quick ? 3 : 7 }
  /// Interleaved rounds of the throughput study.
  var throughputRounds: Int { quick ? 3 : 5 }
  var timerCount: Int { quick ? 100_000 : 1_000_000 }
  var timerFires: Int { quick ? 200 : 2_000 }
  var tracerPasses: Int { quick ? 20_000 : 500_000 }
  var threadCycles: Int { quick ? 200 : 2_000 }
  var idleSeconds: Double { quick ? 0.3 : 2 }
  /// Bursts in the bursty traffic pattern (100 posts each).
  var bursts: Int { quick ? 10 : 200 }
  /// Manual sources on the loop in the scaling study's rows (libuv's million-async goes to
  /// 1 048 576).
  var scalingSourceCounts: [Int] { quick ? [1_000, 100_000] : [1_000, 10_000, 100_000, 1 << 20] }
  /// Rounds of the scaling study, ours and C back to back in each.
  var scalingRounds: Int { quick ? 2 : 5 }
  /// How long the scaling study's signalling thread signals manual sources, per row and side.
  var scalingSignalWindowSeconds: Double { quick ? 0.2 : 1 }
  /// How long the scaling study's other windowed rows count, per row and side.
  var scalingWindowSeconds: Double { quick ? 0.1 : 0.4 }
}
