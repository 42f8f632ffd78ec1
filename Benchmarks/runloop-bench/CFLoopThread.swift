import CBenchBaselines
import CoreFoundation
import Dispatch
import Foundation

/// A thread running CFRunLoopRun, kept alive by a never-signalled source0: CFRunLoop itself,
/// as a peer.
final class CFLoopThread: @unchecked Sendable {  // `loop` is set before `ready` is signalled
  private(set) var loop: CFRunLoop!
  private let ready = DispatchSemaphore(value: 0)
  private let done = DispatchSemaphore(value: 0)

  init() {
    let thread = Thread { [self] in
      loop = CFRunLoopGetCurrent()
      var context = CFRunLoopSourceContext()
      context.perform = { _ in }
      let source = CFRunLoopSourceCreate(nil, 0, &context)
      CFRunLoopAddSource(loop, source, kCFRunLoopDefaultMode)
      ready.signal()
      CFRunLoopRun()
      done.signal()
    }
    thread.start()
    ready.wait()
  }

  func post(_ block: @escaping () -> Void) {
    CFRunLoopPerformBlock(loop, kCFRunLoopDefaultMode as CFTypeRef, block)
    CFRunLoopWakeUp(loop)
  }

  /// Pins the loop's thread to `cpu` (-1: any) and returns once it has.
  func pin(_ cpu: Int32) {
    let pinned = DispatchSemaphore(value: 0)
    post {
      _ = crb_pin_self(cpu)
      pinned.signal()
    }
    pinned.wait()
  }

  func stop() {
    CFRunLoopStop(loop)
    done.wait()
  }
}
