import CGLib
import RunLoopKit

/// Runs a `GMainContext` from a RunLoopKit loop: the loop's sleep stands in for GLib's poll.
///
/// Before the loop sleeps, and whenever one of the context's descriptors or its timeout fires,
/// the driver does one GLib iteration that never blocks: `check` and `dispatch` what the last
/// `prepare` asked for (its descriptors polled with a zero timeout, since the loop already
/// waited), then `prepare` and `query` again. The descriptors GLib asks for become
/// `DescriptorSource`s, its timeout one `LoopTimer` whose fire date is moved.
///
/// Make it on the loop's thread, which acquires the context; `invalidate()` it there too (its
/// items hold it until then).
final class GMainContextDriver {
  let context: OpaquePointer
  private let loop: IsolatedLoop
  private let mode: Loop.Mode
  private var watches: [Int32: DescriptorSource] = [:]
  private var pollFDs = [GPollFD](repeating: GPollFD(), count: 8)
  private var polledCount = 0
  private var maxPriority: gint = 0
  private var prepared = false
  private var timer: LoopTimer?
  private var observer: LoopObserver?
  /// GLib iterations run so far.
  private(set) var iterations = 0
  /// Descriptors that could not be watched, with the loop's error.
  private(set) var errors: [String] = []

  init(context: OpaquePointer, loop: IsolatedLoop, mode: Loop.Mode = .default) throws {
    guard g_main_context_acquire(context) != 0 else {
      throw DriverError.contextOwnedElsewhere
    }
    self.context = context
    self.loop = loop
    self.mode = mode
    // One timer for the driver's life, parked until GLib asks for a timeout.
    timer = try loop.addTimer(
      label: "GLib timeout", fireAt: .distantFuture, repeating: .seconds(86_400 * 365), to: mode
    ) { _ in self.iterate() }
    observer = try loop.addObserver(.beforeWaiting, to: mode) { _, _ in self.iterate() }
    iterate()
  }

  /// Stops driving the context and releases it; call on the loop's thread.
  func invalidate() {
    timer?.invalidate()
    observer?.invalidate()
    for source in watches.values { source.invalidate() }
    watches = [:]
    prepared = false
    g_main_context_release(context)
  }

  /// One non-blocking GLib iteration, then the next one's descriptors and timeout.
  private func iterate() {
    iterations += 1
    if prepared {
      _ = g_poll(&pollFDs, guint(polledCount), 0)
      if g_main_context_check(context, maxPriority, &pollFDs, gint(polledCount)) != 0 {
        g_main_context_dispatch(context)
      }
    }
    _ = g_main_context_prepare(context, &maxPriority)
    var timeout: gint = -1
    while true {
      let needed = Int(
        g_main_context_query(context, maxPriority, &timeout, &pollFDs, gint(pollFDs.count)))
      if needed <= pollFDs.count {
        polledCount = needed
        break
      }
      pollFDs = [GPollFD](repeating: GPollFD(), count: needed)
    }
    prepared = true
    watch(pollFDs.prefix(polledCount))
    timer?.fireDate =
      timeout < 0 ? .distantFuture : LoopClock.now.advanced(by: .milliseconds(Int(timeout)))
  }

  /// Makes the loop watch exactly the descriptors GLib asked for.
  private func watch(_ requests: ArraySlice<GPollFD>) {
    var wanted: [Int32: DescriptorSource.Events] = [:]
    for request in requests {
      var interest: DescriptorSource.Events = []
      let events = UInt32(request.events)
      if events & (G_IO_IN.rawValue | G_IO_PRI.rawValue) != 0 { interest.insert(.readable) }
      if events & G_IO_OUT.rawValue != 0 { interest.insert(.writable) }
      wanted[request.fd, default: []].formUnion(interest)
    }
    for (fd, source) in watches where wanted[fd] == nil {
      source.invalidate()
      watches[fd] = nil
    }
    for (fd, interest) in wanted {
      do {
        if let source = watches[fd] {
          // A source parked after a hang-up or an error polls nothing until its interest is
          // set again; GLib still wants to hear of the descriptor, so set it.
          if source.interest != interest || source.isParked { try source.setInterest(interest) }
        } else {
          watches[fd] = try loop.addSource(
            fileDescriptor: fd, label: "GLib fd \(fd)", interest: interest, to: mode
          ) { source, events in
            if events.contains(.invalidDescriptor) {
              // GLib closed the fd and its number names another file now: watch afresh.
              source.invalidate()
              self.watches[fd] = nil
            }
            self.iterate()
          }
        }
      } catch {
        errors.append("fd \(fd): \(error)")
      }
    }
  }
}

enum DriverError: Error {
  /// Another thread owns the context (`g_main_context_acquire` failed).
  case contextOwnedElsewhere
}
