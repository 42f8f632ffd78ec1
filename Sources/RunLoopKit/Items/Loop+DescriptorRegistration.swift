import Glibc

/// Registering a descriptor source's number in a mode's epoll set, and the proof that comes
/// first: that the number still names the file the source was made for
/// (`DescriptorWitnesses`). Every path that registers a number again — joining another mode,
/// resuming after a hang-up (`setInterest`), a rebuilt set — asks, so a source whose fd was
/// closed and its number reused is refused and parked, never moved onto the new file.
extension Loop {
  /// Pins the file a user's source is first added with.
  func pinLocked(_ source: DescriptorSource) throws(LoopError) {
    guard let witnesses else { preconditionFailure("the witness set is made before any pin") }
    source.witness = try witnesses.pin(source.fileDescriptor) { () throws(LoopError) -> Epoll in
      // The spare only when no new set can be had, as for a mode's rebuild.
      if let fresh = try? Epoll() { return fresh }
      if let spare = spareEpoll.take() { return spare }
      return try Epoll()
    }
    if spareEpoll == nil { spareEpoll = try? Epoll() }
  }

  /// Whether the source's fd still names the file it was first added with (always true for a
  /// descriptor the library owns). One `epoll_ctl` for a user's source.
  func namesOwnFileLocked(_ source: DescriptorSource) -> Bool {
    if source.ownsDescriptor { return true }
    guard source.witness != 0, let witnesses else { return false }
    registrationChecks += 1
    return witnesses.names(source.fileDescriptor, witness: source.witness)
  }

  /// The source no longer needs its pin (invalidated, or its first add failed).
  func releaseWitnessLocked(_ source: DescriptorSource) {
    guard source.witness != 0 else { return }
    witnesses?.release(source.fileDescriptor, witness: source.witness)
    source.witness = 0
  }

  /// Parks every registration of a source whose fd was found to name another file, for good,
  /// without a call: the caller reports it (a thrown error).
  func markStaleEverywhereLocked(_ source: DescriptorSource) {
    for registration in source.registrations where !registration.stale {
      markStaleLocked(source, token: registration.token, in: registration.mode)
    }
  }

  /// What adding or resuming a source whose fd names another file now throws.
  static func staleDescriptorError(_ fd: Int32) -> LoopError {
    .invalidArgument(
      name: "descriptor", value: "fd \(fd)",
      reason: "it no longer refers to the file the source was added with (it was closed "
        + "while the source was still in use, and the number may name another file now); "
        + "invalidate the source and add a new one")
  }

  /// Registers `source`'s number in `mode`'s epoll set under a new token. The caller has
  /// proved the number names the source's file.
  func registerLocked(_ source: DescriptorSource, in mode: ModeState) throws(LoopError) {
    let fd = source.fileDescriptor
    let token = nextToken
    let mask = source.binding.lock.withLock { source.epollMaskUnlocked }
    do throws(LoopError) {
      try mode.epoll.add(fd, events: mask, token: token)
    } catch .system(let failure) where failure.errno == EEXIST {
      // Another live source watching this file in this mode is a misuse, refused. Otherwise
      // the set holds a registration of this file under this number that no source owns:
      // left behind when the number was closed while the file stayed open elsewhere, and
      // the file has come back to the number. Only a new set sheds it.
      if let owner = mode.tokenForDescriptor[fd].flatMap({ mode.descriptors[$0] }),
        namesOwnFileLocked(owner)
      {
        throw .system(failure)
      }
      // Registrations the rebuild finds stale are reported by the mode's next pass.
      mode.staleToReport += rebuildEpollSetLocked(mode).map(\.1)
      try mode.epoll.add(fd, events: mask, token: token)
      // A sleep in the old set (this may be another thread) would not see the new one.
      wakeIfWaitingLocked(in: mode.mode)
    }
    nextToken += 1
    mode.descriptors[token] = source
    // A loop asleep on its futex in this mode watches no descriptors: make it wait again.
    wakeFutexSleeperLocked(in: mode)
    if let previous = mode.tokenForDescriptor.updateValue(token, forKey: fd),
      let older = mode.descriptors[previous],
      let index = older.registrations.firstIndex(where: { $0.token == previous })
    {
      older.registrations[index].superseded = true
    }
    source.registrations.append(DescriptorRegistration(mode: mode, token: token))
  }
}
