import Dispatch
import Foundation
import Glibc
import RunLoopKit
import Synchronization
import Testing

// The examples of the DocC article "Porting Darwin run-loop code", as printed there.

// --- PortingDarwinRunLoopCode.md: the network thread ---
/// AFNetworking 2's network thread: made once, its loop kept alive for ever.
enum NetworkThread {
  static let shared = try! ResidentThread(name: "AFNetworking")
}
// --- end ---

// --- PortingDarwinRunLoopCode.md: the keep-alive thread ---
/// The keep-alive thread of the run-loop tutorials: a port in the default mode, runs until a
/// flag is set, the flag set from another thread through the loop's sources.
final class KeepAliveThread: Sendable {
  private let handle = Mutex<(loop: Loop, stopped: LoopBoundBox<Bool>)?>(nil)
  private let ready = DispatchSemaphore(value: 0)
  let exited = DispatchSemaphore(value: 0)

  func start() {
    let thread = Thread { [self] in
      let loop = Loop.current
      // [runLoop addPort:[NSMachPort port] forMode:NSDefaultRunLoopMode]
      _ = try? loop.assumeIsolated().addPort(of: Int.self) { _ in }
      let stopped = LoopBoundBox(false, loop: loop)
      handle.withLock { $0 = (loop, stopped) }
      ready.signal()
      // while (!self.stopped) [runLoop runMode:NSDefaultRunLoopMode beforeDate:distantFuture]
      while !stopped.value {
        loop.run(in: .default, until: .distantFuture, returnAfterSourceHandled: true)
      }
      exited.signal()
    }
    thread.start()
    ready.wait()
  }

  /// [self performSelector:@selector(stopThread) onThread:thread withObject:nil
  ///   waitUntilDone:NO] (which queues for the common modes)
  func stop() throws {
    guard let (loop, stopped) = handle.withLock({ $0 }) else { return }
    try loop.performAsSource(in: .common) { stopped.value = true }
  }
}
// --- end ---

extension RunLoopKitTests {
  @Suite("Porting Darwin run-loop code: the article's examples") struct PortingDarwin {
    @Test("Article: work for the network thread is delivered through its loop's sources")
    func networkThread() throws {
      let ran = Gate()
      let onThread = Box(false)
      // --- PortingDarwinRunLoopCode.md: sending work to the network thread ---
      // [self performSelector:@selector(operationDidStart) onThread:[[self class]
      //   networkRequestThread] withObject:nil waitUntilDone:NO modes:modes]
      // AFNetworking's runLoopModes default to NSRunLoopCommonModes.
      try NetworkThread.shared.performAsSource(in: .common) {
        onThread.value = NetworkThread.shared.isCurrent
        ran.open()
      }
      // --- end ---
      #expect(ran.wait())
      #expect(onThread.value)
    }

    @Test("113. Article: the keep-alive thread stops within a second of stop()")
    func keepAliveThread() throws {
      let asked = LoopClock.Instant.now
      // --- PortingDarwinRunLoopCode.md: using the keep-alive thread ---
      let worker = KeepAliveThread()
      worker.start()
      try worker.stop()
      // --- end ---
      #expect(worker.exited.wait(timeout: .now() + 10) == .success)
      #expect(asked.duration(to: .now) < .seconds(1))
    }

    @Test("Article: a timer in the common modes fires while a 'tracking' mode runs")
    func commonModesTimer() throws {
      let virtual = VirtualLoop(autoAdvance: true)
      let ticks = try virtual.asCurrent { () throws -> Int in
        let loop = Loop.current
        // --- PortingDarwinRunLoopCode.md: a timer in the common modes ---
        let view = loop.assumeIsolated()
        var ticks = 0
        // [[NSRunLoop currentRunLoop] addTimer:timer forMode:NSRunLoopCommonModes]
        try view.addTimer(after: .milliseconds(10), repeating: .milliseconds(10), to: .common) {
          _ in ticks += 1
        }
        // UITrackingRunLoopMode is one of the common modes on iOS; here a mode is made one.
        try loop.addCommonMode(Loop.Mode("tracking"))
        loop.run(in: Loop.Mode("tracking"), for: .milliseconds(100))  // a scroll
        // --- end ---
        return ticks
      }
      #expect(ticks == 10)
    }

    @Test("Article: an observer of the loop's activities, and the rescue loop over every mode")
    func observerAndRescue() throws {
      let told = try onLoopThread { loop -> [String] in
        var told: [String] = []
        let view = loop.assumeIsolated()
        // Due already: a 1 ms run of its mode fires it.
        try view.addTimer(after: .zero, to: Loop.Mode("modal")) { _ in told.append("modal timer") }
        try view.addPort(of: Int.self) { _ in }
        // --- PortingDarwinRunLoopCode.md: an observer ---
        // CFRunLoopObserverCreateWithHandler(NULL, kCFRunLoopBeforeWaiting |
        //   kCFRunLoopAfterWaiting, YES, 0, ^(CFRunLoopObserverRef o, CFRunLoopActivity a) {…})
        try view.addObserver([.beforeWaiting, .afterWaiting]) { _, activity in
          told.append("\(activity)")
        }
        // --- end ---
        // --- PortingDarwinRunLoopCode.md: the rescue loop ---
        // for (NSString *mode in (__bridge_transfer NSArray *)CFRunLoopCopyAllModes(runLoop))
        //   CFRunLoopRunInMode((__bridge CFStringRef)mode, 0.001, false);
        for mode in loop.modes {
          loop.run(in: mode, for: .milliseconds(1))
        }
        // --- end ---
        told.append("modes: \(loop.modes.map(\.name))")
        return told
      }
      #expect(told.first == "beforeWaiting")
      #expect(told.contains("afterWaiting"))
      #expect(told.contains("modal timer"), "the rescue loop ran the mode \"modal\" too")
      #expect(told.last == "modes: [\"\(Loop.Mode.default.name)\", \"modal\"]")
    }

    @Test("Every Swift snippet of Porting Darwin run-loop code appears line for line in a test")
    func articleSnippetsAreTests() throws {
      let article = try PackageFiles.text(
        "Sources/RunLoopKit/RunLoopKit.docc/PortingDarwinRunLoopCode.md")
      let snippets = ReadmeSnippets.swiftSnippets(in: article)
      #expect(snippets.count >= 6, "the article's Swift snippets were not found")
      for snippet in try ReadmeSnippets.notInTests(snippets) {
        Issue.record("no test holds the article's snippet that starts \"\(snippet.first ?? "")\"")
      }
    }
  }
}
