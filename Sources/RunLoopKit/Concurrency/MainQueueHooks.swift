import Dispatch

/// libdispatch's private hooks for a run loop that serves the main queue: the interface
/// CFRunLoop uses on Linux so that `RunLoop.main` runs `DispatchQueue.main` blocks and, with
/// them, `@MainActor` jobs (the main actor's executor on Linux is the main queue).
///
/// `_dispatch_get_main_queue_handle_4CF` returns an eventfd that libdispatch writes whenever the
/// main queue gets work; `_dispatch_main_queue_callback_4CF` runs the blocks queued so far
/// (a block queued by one of them waits for the next call). The callback does not read the
/// eventfd: the run loop must reset it itself, or a level-triggered epoll set would spin.
///
/// Private, unversioned symbols: checked on Swift 6.3.1 (swift-6.3.1-RELEASE, its libdispatch
/// exports both). The tests check the behaviour (blocks and main-actor jobs run while
/// `Loop.main` runs), not the symbols, so a toolchain that changes them fails loudly there.
enum MainQueueHooks {
  /// The main queue's wake-up eventfd, created by libdispatch on first use; never closed.
  static var handle: Int32 { dispatchMainQueueHandle() }

  /// Runs the main-queue blocks queued so far, on the calling (main) thread.
  static func drain() { dispatchMainQueueCallback(nil) }
}

@_silgen_name("_dispatch_get_main_queue_handle_4CF")
private func dispatchMainQueueHandle() -> Int32

@_silgen_name("_dispatch_main_queue_callback_4CF")
private func dispatchMainQueueCallback(_ message: UnsafeMutableRawPointer?)
