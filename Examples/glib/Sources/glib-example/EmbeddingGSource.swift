import CGLib
import RunLoopKit

/// The whole host side of a `LoopEmbedding` in GLib: one `GSource` that watches the embedding's
/// descriptor, tells GLib how long it may sleep, and runs a pass when either comes due.
///
/// GLib calls the three functions below on the thread that runs the context, which for the
/// default context is the main thread, the one `Loop.main` belongs to.
final class EmbeddingGSource {
  let embedding: LoopEmbedding
  /// Passes run so far: the host's view of how often the loop had work.
  private(set) var passes = 0
  private let functions: UnsafeMutablePointer<GSourceFuncs>
  private let source: UnsafeMutablePointer<GSource>
  private let tag: gpointer

  /// Attaches the source to `context` (nil: GLib's default context).
  init(embedding: LoopEmbedding, context: OpaquePointer?) {
    self.embedding = embedding
    functions = .allocate(capacity: 1)
    functions.initialize(
      to: GSourceFuncs(
        prepare: { source, timeout in
          // The timeout GLib's poll may sleep for; a deadline already due means "ready now".
          let milliseconds = EmbeddingGSource.owner(of: source).embedding.pollTimeout
          timeout?.pointee = milliseconds
          return milliseconds == 0 ? 1 : 0
        },
        check: { source in
          let owner = EmbeddingGSource.owner(of: source)
          let events = g_source_query_unix_fd(source, owner.tag)
          let readable = events.rawValue & G_IO_IN.rawValue != 0
          return readable || owner.embedding.pollTimeout == 0 ? 1 : 0
        },
        dispatch: { source, _, _ in
          let owner = EmbeddingGSource.owner(of: source)
          owner.passes += 1
          owner.embedding.runPass()
          return 1  // G_SOURCE_CONTINUE
        },
        finalize: nil, closure_callback: nil, closure_marshal: nil))
    // GLib sources carry their own data after the GSource header: here, a pointer back to self.
    let size = MemoryLayout<GSource>.stride + MemoryLayout<UnsafeRawPointer>.stride
    source = g_source_new(functions, guint(size))
    tag = g_source_add_unix_fd(source, embedding.descriptor, G_IO_IN)
    g_source_set_name(source, "RunLoopKit embedding")
    (UnsafeMutableRawPointer(source) + MemoryLayout<GSource>.stride).storeBytes(
      of: Unmanaged.passUnretained(self).toOpaque(), as: UnsafeMutableRawPointer.self)
    g_source_attach(source, context)
  }

  /// Detaches the source, then ends the embedding (whose descriptor is closed then: GLib must
  /// stop watching it first).
  func invalidate() {
    g_source_destroy(source)
    g_source_unref(source)
    embedding.invalidate()
    functions.deallocate()
  }

  private static func owner(of source: UnsafeMutablePointer<GSource>?) -> EmbeddingGSource {
    let slot = UnsafeMutableRawPointer(source!) + MemoryLayout<GSource>.stride
    let pointer = slot.load(as: UnsafeMutableRawPointer.self)
    return Unmanaged<EmbeddingGSource>.fromOpaque(pointer).takeUnretainedValue()
  }
}
