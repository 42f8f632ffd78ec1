import CRunLoopShims

/// How a resident thread is set up, checked before any thread is created.
struct ThreadConfiguration: Sendable {
  /// Linux keeps 16 bytes for a thread's name, NUL included.
  static let maximumNameBytes = 15
  /// glibc's PTHREAD_STACK_MIN on the platforms Swift supports.
  static let minimumStackSize = 16 * 1024

  /// Swift's runtime needs more than the 16 KiB a C thread can live with: a thread started with
  /// less crashes in metadata instantiation. Smaller (valid) requests are rounded up to this.
  static let smallestUsableStack = 64 * 1024

  let name: String
  let stackSize: Int?
  let niceness: Int32?
  let cpuAffinity: [Int32]?
  let waitPolicy: Loop.WaitPolicy

  init(
    name: String, stackSize: Int?, niceness: Int32?, cpuAffinity: Set<Int>?,
    waitPolicy: Loop.WaitPolicy = .sleep
  ) throws(LoopError) {
    let bytes = name.utf8.count
    guard bytes <= ThreadConfiguration.maximumNameBytes else {
      throw .invalidArgument(
        name: "thread name", value: "\"\(name)\"",
        reason: "it is \(bytes) bytes; Linux allows at most 15 (errno ERANGE)")
    }
    guard !name.utf8.contains(0) else {
      throw .invalidArgument(
        name: "thread name", value: "\"\(name)\"", reason: "a thread name cannot contain a NUL byte"
      )
    }
    if let stackSize {
      let page = crl_page_size()
      guard stackSize >= ThreadConfiguration.minimumStackSize else {
        throw .invalidArgument(
          name: "stack size", value: "\(stackSize)",
          reason: "it must be at least 16384 bytes (16 KiB) (errno EINVAL)")
      }
      guard stackSize % page == 0 else {
        throw .invalidArgument(
          name: "stack size", value: "\(stackSize)",
          reason: "it must be a multiple of the page size, \(page) bytes (errno EINVAL)")
      }
    }
    if let niceness, !(-20...19).contains(niceness) {
      throw .invalidArgument(
        name: "niceness", value: "\(niceness)", reason: "it must be in -20...19")
    }
    if let cpuAffinity {
      guard !cpuAffinity.isEmpty else {
        throw .invalidArgument(
          name: "CPU affinity", value: "[]", reason: "a CPU set must name at least one CPU")
      }
      if let bad = cpuAffinity.first(where: { $0 < 0 || $0 >= 1024 }) {
        throw .invalidArgument(
          name: "CPU affinity", value: "\(bad)", reason: "CPUs are numbered 0 to 1023")
      }
    }
    self.name = name
    self.stackSize = stackSize
    self.niceness = niceness
    self.cpuAffinity = cpuAffinity.map { $0.sorted().map { Int32($0) } }
    self.waitPolicy = waitPolicy
  }

  /// What is actually asked of pthread: the requested size, but no less than what Swift needs
  /// or than the platform's PTHREAD_STACK_MIN.
  var allocatedStackSize: Int? {
    stackSize.map { max($0, ThreadConfiguration.smallestUsableStack, Int(crl_stack_minimum())) }
  }

  /// Applies name, niceness and affinity to the calling thread (the new one, as it starts).
  func applyToCurrentThread() throws(LoopError) {
    let nameResult = crl_set_thread_name(name)
    if nameResult != 0 {
      throw .system(
        SystemError(operation: "pthread_setname_np", subject: "\"\(name)\"", errno: nameResult))
    }
    if let niceness {
      try Syscall.retryingEINTR("setpriority", on: "niceness \(niceness)") {
        crl_set_thread_niceness(niceness)
      }
    }
    if let cpuAffinity {
      try Syscall.retryingEINTR("sched_setaffinity", on: "CPUs \(cpuAffinity)") {
        cpuAffinity.withUnsafeBufferPointer {
          crl_set_thread_affinity($0.baseAddress, Int32($0.count))
        }
      }
    }
  }
}
