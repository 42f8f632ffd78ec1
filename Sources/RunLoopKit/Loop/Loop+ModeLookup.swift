/// Finding a mode's state by name, and making it (with its epoll set and timerfd) the first
/// time a mode is named; the checks every add makes first. Everything here is called with the
/// loop's lock held.
extension Loop {
  /// The state of a mode, created (with its epoll set and timerfd) on first use.
  @inline(__always)
  func modeLocked(_ name: Mode) throws(LoopError) -> ModeState {
    try unmanagedModeLocked(name).takeUnretainedValue()
  }

  /// `modeLocked` without taking a reference: the mode stays valid while the loop's lock is
  /// held (only teardown lets modes go), and a timer's add should cost no reference counting
  /// it does not need.
  @inline(__always)
  func unmanagedModeLocked(_ name: Mode) throws(LoopError) -> Unmanaged<ModeState> {
    // Adding many items to one mode names the same mode each time: comparing it with the last
    // one found is cheaper than hashing the name again (measured: ~20 ns of a timer's add).
    // Inlined, with the lookup out of line, so the usual case costs no call.
    if let last = lastModeFound, last._withUnsafeGuaranteedRef({ $0.mode == name }) {
      return last
    }
    return Unmanaged.passUnretained(try lookUpModeLocked(name))
  }

  /// `modeLocked` when the mode is not the one found last.
  private func lookUpModeLocked(_ name: Mode) throws(LoopError) -> ModeState {
    if let mode = modeStates[name] {
      lastModeFound = Unmanaged.passUnretained(mode)
      return mode
    }
    try checkUsableLocked(name)
    let mode = try ModeState(
      mode: name, wakeFD: try wakeFDLocked(), isVirtual: virtualClock != nil)
    if commonModeNames.contains(name) { mode.isCommon = true }
    modeStates[name] = mode
    modesMade.append(name)
    lastModeFound = Unmanaged.passUnretained(mode)
    return mode
  }

  /// The wake-up eventfd, made now if the loop could not make it when it was created.
  func wakeFDLocked() throws(LoopError) -> EventFD {
    if let wakeFD { return wakeFD }
    let made = try EventFD()
    wakeFD = made
    return made
  }

  /// Keeps an empty epoll set in reserve (see `spareEpoll`) and makes the witness set (see
  /// `DescriptorWitnesses`); done when the loop's first user descriptor source is added,
  /// which throws if those descriptors cannot be had.
  func reserveSpareEpollLocked() throws(LoopError) {
    if spareEpoll == nil { spareEpoll = try Epoll() }
    if witnesses == nil { witnesses = try DescriptorWitnesses() }
  }

  /// What creating a mode requires: `checkAddableLocked`, and a name other than `.common`,
  /// which stands for the common set and is never a mode of its own.
  func checkUsableLocked(_ name: Mode) throws(LoopError) {
    guard name != .common else { throw .invalidMode(name: name.name) }
    try checkAddableLocked(to: name)
  }

  /// What every add requires before anything is bound: a named mode, and a loop whose thread
  /// has not exited.
  func checkAddableLocked(to name: Mode) throws(LoopError) {
    try Loop.checkNamed(name)
    guard !tornDown else { throw .loopTornDown(thread: threadDescription) }
  }
}
