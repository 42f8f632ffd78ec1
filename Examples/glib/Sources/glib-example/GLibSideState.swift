import CGLib
import RunLoopKit

/// The GLib side of part (b): a timeout and a GIOChannel watch attached to the driven context,
/// and what their callbacks saw. Lives on the loop's thread; GLib's callbacks reach it through
/// their `user_data` pointer.
final class GLibSideState {
  private let thread: ResidentThread
  private let onDone: () -> Void
  private(set) var ticks = 0
  private var wantedTicks = 0
  private(set) var bytesRead = 0
  private var wantedBytes = 0
  private var problems: [String] = []
  private var sources: [UnsafeMutablePointer<GSource>] = []
  private var channel: UnsafeMutablePointer<GIOChannel>?

  init(thread: ResidentThread, onDone: @escaping () -> Void) {
    self.thread = thread
    self.onDone = onDone
  }

  /// `g_timeout_add`, but on `context` rather than GLib's global default one.
  func attachTimeout(to context: OpaquePointer, every milliseconds: guint, times: Int) {
    wantedTicks = times
    let source = g_timeout_source_new(milliseconds)!
    g_source_set_callback(
      source,
      { data in
        let state = GLibSideState.from(data)
        state.ticks += 1
        state.checkWhere("the timeout")
        state.finishIfDone()
        return state.ticks < state.wantedTicks ? 1 : 0
      }, Unmanaged.passUnretained(self).toOpaque(), nil)
    attach(source, to: context)
  }

  /// `g_io_add_watch` for `fd`'s readability, on `context`.
  func attachWatch(on fd: Int32, to context: OpaquePointer, expecting bytes: Int) {
    wantedBytes = bytes
    channel = g_io_channel_unix_new(fd)
    let source = g_io_create_watch(channel, G_IO_IN)!
    let watch: GIOFunc = { _, _, data in
      let state = GLibSideState.from(data)
      var buffer = [UInt8](repeating: 0, count: 4096)
      let count = read(g_io_channel_unix_get_fd(state.channel), &buffer, buffer.count)
      if count > 0 { state.bytesRead += count }
      state.checkWhere("the GIOChannel watch")
      state.finishIfDone()
      return 1
    }
    // A watch's callback is a GIOFunc; GLib stores every callback as a GSourceFunc.
    g_source_set_callback(
      source, unsafeBitCast(watch, to: GSourceFunc.self), Unmanaged.passUnretained(self).toOpaque(),
      nil)
    attach(source, to: context)
  }

  func report(iterations: Int, errors: [String]) -> Report {
    Report(ticks: ticks, bytesRead: bytesRead, iterations: iterations, problems: problems + errors)
  }

  /// Detaches everything; on the loop's thread.
  func release() {
    for source in sources {
      g_source_destroy(source)
      g_source_unref(source)
    }
    sources = []
    if let channel { g_io_channel_unref(channel) }
    channel = nil
  }

  private func attach(_ source: UnsafeMutablePointer<GSource>, to context: OpaquePointer) {
    g_source_attach(source, context)
    sources.append(source)
  }

  /// GLib's callbacks must run on the loop's thread while the loop runs in its default mode.
  private func checkWhere(_ what: String) {
    if !thread.isCurrent { problems.append("\(what) ran off the loop's thread") }
    if thread.loop.currentMode != .default {
      problems.append("\(what) ran outside the loop's default mode")
    }
  }

  private func finishIfDone() {
    if ticks == wantedTicks && bytesRead == wantedBytes { onDone() }
  }

  private static func from(_ data: gpointer?) -> GLibSideState {
    Unmanaged<GLibSideState>.fromOpaque(data!).takeUnretainedValue()
  }
}
