import CRunLoopShims
import Dispatch
import Glibc
import RunLoopKit
import Synchronization
import XCTest

/// `Loop.main` embedded in a host loop on the real main thread (XCTest runs test methods
/// there): main-queue work and a main-actor task make the descriptor readable, and the host's
/// passes run them on the main thread.
final class MainLoopEmbeddingTests: XCTestCase {
  func test_95_mainQueueAndMainActorWakeAnEmbeddedMainLoop() throws {
    let embedding = try Loop.main.makeEmbedding()
    defer { embedding.invalidate() }
    let ran = Ran()
    DispatchQueue.main.async { ran.queue = crl_is_main_thread() != 0 }
    Task { @MainActor in ran.actor = crl_is_main_thread() != 0 }
    // The host's loop: wait for the descriptor, then run a pass, until both ran.
    let deadline = LoopClock.Instant.now.advanced(by: .seconds(10))
    while !(ran.queue && ran.actor) && LoopClock.Instant.now < deadline {
      var entry = pollfd(fd: embedding.descriptor, events: Int16(POLLIN), revents: 0)
      _ = poll(&entry, 1, 1_000)
      embedding.runPass()
    }
    XCTAssertTrue(ran.queue, "DispatchQueue.main.async ran on the main thread")
    XCTAssertTrue(ran.actor, "a @MainActor task ran on the main thread")
  }
}

/// What ran, and whether on the main thread.
private final class Ran: Sendable {
  private let flags = Atomic<UInt8>(0)
  var queue: Bool {
    get { flags.load(ordering: .acquiring) & 1 != 0 }
    set { if newValue { flags.bitwiseOr(1, ordering: .releasing) } }
  }
  var actor: Bool {
    get { flags.load(ordering: .acquiring) & 2 != 0 }
    set { if newValue { flags.bitwiseOr(2, ordering: .releasing) } }
  }
}
