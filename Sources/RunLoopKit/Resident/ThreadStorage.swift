import Glibc

/// A typed key for `ThreadStorage`. Each `init` makes a new, distinct key (keep it in a
/// `static let`); copies of a key are the same key. Where `NSThread.threadDictionary` keys are
/// untyped strings, this key carries the value's type.
public struct ThreadStorageKey<Value>: Hashable, Sendable {
  /// What the store files the value under: unique to this key and its copies, so every key
  /// with this id has the same `Value` type.
  @usableFromInline let id = SignalClock.next()
  /// A name for debugging; two keys with the same name are still distinct.
  public let name: String

  /// Makes a new key, distinct from every other, even one with the same name.
  public init(_ name: String) { self.name = name }
}

/// A per-thread key/value store, like `Thread.threadDictionary` but typed: values are read
/// back with the type their key declares. Each thread has its own, created on first use and
/// released when the thread exits. Not `Sendable`: it only ever belongs to one thread.
public final class ThreadStorage {
  /// One value, boxed so that a write changes it in place (no dictionary write) and a read
  /// needs no dynamic cast: a key's id fixes its value's type (see `ThreadStorageKey.id`).
  @usableFromInline final class Slot<Value> {
    @usableFromInline var value: Value
    @usableFromInline init(_ value: Value) { self.value = value }
  }

  @usableFromInline var values: [UInt64: AnyObject] = [:]

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

  /// The value stored under `key` on this thread, or nil; setting nil removes it. Inlinable,
  /// so that a caller's code is specialized for `Value`: unspecialized generic code would
  /// look the slot's type metadata up on every access.
  @inlinable
  public subscript<Value>(key: ThreadStorageKey<Value>) -> Value? {
    get { values[key.id].map { unsafeDowncast($0, to: Slot<Value>.self).value } }
    set {
      guard let newValue else {
        values[key.id] = nil
        return
      }
      if let slot = values[key.id] {
        unsafeDowncast(slot, to: Slot<Value>.self).value = newValue
      } else {
        values[key.id] = Slot(newValue)
      }
    }
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
