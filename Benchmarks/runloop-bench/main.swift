// runloop-bench: how fast a sleeping RunLoopKit loop wakes and runs posted work, what a
// busy-waiting thread buys instead and at what CPU cost, and how RunLoopKit stands against
// the other ways to do it on Linux — all peers measured in the same process run.
import CBenchBaselines
import Foundation
import Glibc

guard let options = Options.parse(Array(CommandLine.arguments.dropFirst())) else {
  print(Options.usage)
  exit(2)
}

let progress = Progress()
var report = Report()
report.quick = options.quick
report.machine = Machine.describe()
print("runloop-bench\(options.quick ? " --quick" : "") on \(report.machine)")

report.wakeSamplesPerRound = options.wakeSamples
report.wakeReferenceSamples = options.wakeReferenceSamples
if options.wants("wake") {
  report.wake = try await WakeLatencyStudy.run(options, progress: progress)
}
if options.wants("spin") {
  report.spin = try SpinWindowStudy.run(options, progress: progress)
}
// The two studies above pin threads that outlive them, and this code may carry on after the
// await on one of them; the studies below say "unpinned" and must be: every thread they create
// inherits its creator's CPUs.
let unpinned = crb_unpin_every_thread()
precondition(unpinned == 0, "unpinning the bench's threads failed with errno \(unpinned)")
if options.wants("idle") {
  report.idle = try ThreadCostStudy.idle(options, progress: progress)
}
if options.wants("throughput") {
  report.throughput = try ThroughputStudy.run(options, progress: progress)
}
if options.wants("group") {
  report.groupThroughput = try GroupThroughputStudy.run(options, progress: progress)
}
if options.wants("threads") {
  let resident = report.wake.first { $0.name == "ResidentThread.perform" }?
    .figures(in: .crossCPU)?.pooled
  report.threads = try ThreadCostStudy.keepAlive(
    options, residentLatency: resident, progress: progress)
}
if options.wants("timers") {
  report.timerScale = try TimerStudy.scale(options, progress: progress)
  report.timerLateness = try TimerLatenessStudy.run(options, progress: progress)
  report.sleepLateness = try await SleepLatenessStudy.run(options, progress: progress)
}
if options.wants("alloc") {
  report.allocations = try await AllocationStudy.run(options, progress: progress)
}
if options.wants("executors") {
  report.executorSplit = try await ExecutorSplitStudy.run(options, progress: progress)
}
if options.wants("isolated") {
  report.isolated = try IsolatedLoopStudy.run(options, progress: progress)
  report.threadStorage = try ThreadStorageStudy.run(options, progress: progress)
}
if options.wants("virtual") {
  report.virtualTime = try VirtualTimeStudy.run(options, progress: progress)
  report.virtualTasks = try await VirtualTaskStudy.run(options, progress: progress)
}
if options.wants("tracer") {
  report.tracer = try TracerCostStudy.run(options, progress: progress)
}
if options.wants("scaling") {
  report.scaling = try ScalingStudy.run(options, progress: progress)
}
report.targets = Targets.check(report)
report.printTables()

if let path = options.jsonPath {
  try report.writeJSON(to: path)
  print("\nwrote \(path)")
}
if let path = options.svgPath {
  let title = "Wake latency on \(report.machine)"
  try LatencyChart.svg(LatencyChart.series(from: report.wake), title: title)
    .write(toFile: path, atomically: true, encoding: .utf8)
  print("wrote \(path)")
  if let scaling = report.scaling {
    let scalingPath = ScalingChart.path(besides: path)
    try ScalingChart.svg(scaling, title: "Manual sources at scale on \(report.machine)")
      .write(toFile: scalingPath, atomically: true, encoding: .utf8)
    print("wrote \(scalingPath)")
  }
}
if let path = options.tracePath {
  try TraceSample.write(to: path)
  print("wrote \(path) (a traced sample workload, for ui.perfetto.dev)")
}
