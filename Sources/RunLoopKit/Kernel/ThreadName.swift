import CRunLoopShims
import Glibc

/// Reads a thread's name (`pthread_getname_np`, what `top -H` and gdb show), for messages
/// that must say which thread was meant. Names are at most 15 bytes on Linux.
enum ThreadName {
  /// The name of `thread`, or nil if it has none the kernel will report (an exited thread).
  static func of(_ thread: pthread_t) -> String? {
    var buffer = [CChar](repeating: 0, count: 16)
    guard crl_get_thread_name(thread, &buffer, buffer.count) == 0 else { return nil }
    let name = String(
      decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return name.isEmpty ? nil : name
  }

  /// "thread 20665 \"network\"" — the kernel id, and the name when there is one.
  static func describe(id: pid_t, name: String?) -> String {
    name.map { "thread \(id) \"\($0)\"" } ?? "thread \(id)"
  }

  /// The calling thread, described as `describe` does.
  static var current: String {
    describe(id: crl_gettid(), name: of(pthread_self()))
  }
}
