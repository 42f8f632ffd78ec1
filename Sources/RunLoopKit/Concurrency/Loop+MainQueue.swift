import CRunLoopShims

/// `Loop.main` serves the main dispatch queue, as CFRunLoop does on Linux: `DispatchQueue.main`
/// blocks and `@MainActor` jobs (the main actor's executor is the main queue) run while
/// `Loop.main` runs in a common mode, so a program can run `Loop.main` instead of
/// `dispatchMain()` and lose neither.
///
/// How: the first time the main thread runs its loop, libdispatch's main-queue eventfd is added
/// as a descriptor source to `.common`. Like CF's dispatch port it therefore
/// - wakes the loop only in common modes: a nested run in a mode outside the common set (a
///   "tracking" mode) holds main-queue work back until a common mode runs again;
/// - keeps the common modes of the main loop alive, so `Loop.main.run()` does not return
///   `.finished` (CF: `__CFRunLoopModeIsEmpty` answers no for them);
/// - is served once per wake, after timers and before other descriptors, one batch at a time
///   (a block queued by a main-queue block runs on the next pass);
/// - is never served re-entrantly: a drain of the main queue is a job (see
///   Loop+ExecutorJobs.swift), so a run nested inside a main-queue block, a main-actor job or
///   any executor job of the main loop leaves it alone until that job returns (libdispatch's
///   drain is not re-entrant, and a serial queue runs one block at a time).
///
/// If the source cannot be added (the process is out of descriptors for a common mode's epoll
/// set), that run goes without the main queue and the next run of the main thread tries again.
extension Loop {
  /// Adds the main-queue source the first time the main thread runs its loop. No-op on every
  /// other thread and on later runs.
  func serveMainQueueIfMainThread() {
    guard isMainThreadLoop else { return }
    let fd = lock.withLock { () -> Int32? in
      guard !mainQueue.installed, !tornDown else { return nil }
      mainQueue.installed = true
      return MainQueueHooks.handle
    }
    guard let fd else { return }
    let source = DescriptorSource(
      fileDescriptor: fd, label: "main queue", interest: .readable, order: .min,
      onTeardown: nil, isMainQueue: true
    ) {
      // Unowned, not weak: a weak reference gives the loop a side table, which sends every
      // retain and release of `Loop.main` down the runtime's slow path (callgrind: ~250
      // instructions a pass). Only this loop calls the handler, and its teardown invalidates
      // the source (releasing the handler) before the loop can go.
      [unowned self] _, _ in self.serveMainQueue(fd)
    }
    do {
      try add(source, to: .common)
    } catch {
      // Only running out of descriptors (or kernel memory) for a common mode's epoll set can
      // get here. The run goes on without the main queue; the next run tries again.
      lock.withLock { mainQueue.installed = false }
      source.invalidate()
    }
  }

  /// Runs the main-queue blocks queued so far, as a job. The eventfd is reset first, so work
  /// queued by these blocks wakes the loop again.
  private func serveMainQueue(_ fd: Int32) {
    _ = try? EventFD.drain(fd)
    // Inside a job: served when that job returns (it sets the eventfd again).
    guard !holdMainQueueIfInsideJob() else { return }
    runAsJob { MainQueueHooks.drain() }
  }

  /// The main loop's main-queue state. Guarded by the loop's lock.
  struct MainQueueState {
    var installed = false
  }
}
