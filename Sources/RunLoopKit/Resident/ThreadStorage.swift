import Glibc

/// A typed key for `ThreadStorage`. Each `init` makes a new, distinct key (keep it in a
/// `static let`); copies of a key are the same key. Where `NSThread.threadDictionary` keys are
/// untyped strings, this key carries the value's type.
public struct ThreadStorageKey<Value>: Hashable, Sendable {
  private let id = SignalClock.next()
  /// A name for debugging; two keys with the same name are still distinct.
  public let name: String

  /// Makes a new key, distinct from every other, even one with the same name.
  public init(_ name: String) { self.name = name }
}

/// A per-thread key/value store, like `Thread.threadDictionary` but typed: values are read
/// back with the type their key declares. Each thread has its own, created on first use and
/// released when the thread exits. Not `Sendable`: it only ever belongs to one thread.
public final class ThreadStorage {
  private var values: [AnyHashable: Any] = [:]

  fileprivate init() {}

  /// The calling thread's store.
  public static var current: ThreadStorage {
    if let stored = pthread_getspecific(threadStorageKey) {
      return Unmanaged<ThreadStorage>.fromOpaque(stored).takeUnretainedValue()
    }
    let storage = ThreadStorage()
    pthread_setspecific(threadStorageKey, Unmanaged.passRetained(storage).toOpaque())
    return storage
  }

  /// The value stored under `key` on this thread, or nil; setting nil removes it.
  public subscript<Value>(key: ThreadStorageKey<Value>) -> Value? {
    get { values[key] as? Value }
    set { values[key] = newValue }
  }

  /// Removes every value.
  public func removeAll() { values.removeAll() }

  /// How many values are stored.
  public var count: Int { values.count }
}

private let threadStorageKey: pthread_key_t = {
  var key = pthread_key_t()
  let result = pthread_key_create(&key) { value in
    guard let value else { return }
    Unmanaged<ThreadStorage>.fromOpaque(value).release()
  }
  precondition(result == 0, "pthread_key_create failed with \(result)")
  return key
}()
