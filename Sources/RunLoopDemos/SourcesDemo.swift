import Glibc
import RunLoopKit
import Synchronization

/// `sources`: a manual source that is signalled but not woken waits for something else to
/// wake the loop; a descriptor source wakes it by itself.
public enum SourcesDemo {
  // Longer than ~60 lines on purpose: a scenario is a script the demo prints step by
  // step, and it reads best top to bottom, in the order the steps appear in its output.
  public static func run() throws -> DemoReport {
    var report = DemoReport(name: "sources", title: "signalled is not woken")
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else { throw DemoError("pipe() failed: errno \(errno)") }
    let (readEnd, writeEnd) = (fds[0], fds[1])
    defer {
      close(readEnd)
      close(writeEnd)
    }
    let performed = Atomic<Int>(0)
    let loopBox = Locked<Loop?>(nil)
    let manual = ManualSource(label: "manual") { performed.add(1, ordering: .relaxed) }
    let tracer = LoopTracer()
    let thread = DemoThread(name: "sources") { () throws -> Void in
      let loop = Loop.current
      let pipeSource = DescriptorSource(fileDescriptor: readEnd, label: "pipe") { _, _ in
        var byte: UInt8 = 0
        _ = read(readEnd, &byte, 1)
      }
      try loop.add(pipeSource, to: .default)
      try loop.add(manual, to: .default)
      defer {
        pipeSource.invalidate()
        manual.invalidate()
      }
      try tracer.attach(to: loop)
      loopBox.value = loop
      loop.run(in: .default, until: .now.advanced(by: .seconds(10)))
      tracer.detach()
    }
    // If a step below fails, end the loop thread before the pipe it reads is closed.
    var joined = false
    defer {
      if !joined {
        loopBox.value?.stop()
        _ = try? thread.join(seconds: 15)
      }
    }
    try waitFor("the loop to sleep") { loopBox.value?.isWaiting == true }
    let loop = loopBox.value!
    var notes: [String] = []

    manual.signal()
    notes.append("At \(stamp(tracer)) another thread called manual.signal() and nothing else.")
    usleep(100_000)
    notes.append(
      "100 ms later the source had run \(performed.load(ordering: .relaxed)) times and the loop "
        + "was \(loop.isWaiting ? "still asleep" : "awake"): a signal only marks the source ready.")

    _ = "x".withCString { write(writeEnd, $0, 1) }
    notes.append(
      "At \(stamp(tracer)) it wrote one byte into the pipe: the descriptor source woke the loop, "
        + "and the pass after it performed the waiting manual source.")
    try waitFor("the manual source to run") {
      performed.load(ordering: .relaxed) == 1 && loop.isWaiting
    }

    manual.signalAndWake()
    notes.append(
      "At \(stamp(tracer)) it called manual.signalAndWake() (signal, then loop.wakeUp()): "
        + "woken through the loop's eventfd, the loop performed it straight away.")
    try waitFor("the second perform") { performed.load(ordering: .relaxed) == 2 && loop.isWaiting }
    loop.stop()
    try thread.join()
    joined = true

    report.steps.append(
      DemoStep(
        caption: "A loop with a manual source \"manual\" and a descriptor source on a pipe",
        trace: tracer.snapshot(), notes: notes))
    report.explanation = """
      A manual source (CF's version-0 source) is a flag the loop checks at the top of each \
      pass. Setting it wakes nobody: the thread sleeps in epoll_wait, and only file \
      descriptors are in that set. So a signalled source waits until something else wakes the \
      loop (here the pipe, a deadline or a timer in real code), or until its signaller also \
      calls wakeUp(), which writes the loop's eventfd. A descriptor source (CF's version-1 \
      source, a Mach port there) is in the epoll set itself: data arriving is the wake-up. \
      That is why CF's documentation pairs CFRunLoopSourceSignal with CFRunLoopWakeUp.
      """
    return report
  }
}
