import Glibc

/// Which file each of a loop's descriptor sources was made for, so that no fd number is ever
/// registered again for a source (joining a mode, resuming after a hang-up, a rebuilt set)
/// once it names another file.
///
/// A source holds only a number, and a number outlives its file: the user may close it
/// behind the source's back and `pipe()` or `dup2` hand it to another file. Device and inode
/// alone cannot tell the files apart (eventfds, timerfds and epoll sets share one anonymous
/// inode), and a `dup` kept to hold a file would keep it open after the user's close. What can
/// tell them apart is epoll itself: it keys a registration by file *and* number, and drops it
/// when the file is closed everywhere. So each source's file is pinned by a registration in an
/// epoll set of the loop's own that nobody waits on (the witness set): registering the number
/// there again (`epoll_ctl(ADD)`) fails with EEXIST only while the number names a file pinned
/// under that number (see `Epoll.probe`).
///
/// A pin whose number was closed while its file stayed open elsewhere (a `dup`, a child
/// process) cannot be removed by that number — `DEL` names whatever file the number names
/// now — so it may linger, and would answer for its file if that file ever came back to the
/// number. Such numbers are marked lingering; there a pin is also compared with the
/// device and inode `fstat` reports (enough unless both files are anonymous-inode ones), and
/// the set is rebuilt without what lingers once lingering numbers outnumber live pins (at
/// least 64), as a mode's epoll set is: a few syscalls per pin, amortised. A number usually
/// lingers for nothing (its file was closed everywhere, which dropped the pin), but the loop
/// cannot tell. An anonymous-inode file (an eventfd, a timerfd) pinned on a lingering number
/// rebuilds the set first, since device and inode cannot tell two of those apart.
///
/// Guarded by the loop's lock. Sources whose descriptor the library owns (ports, signal and
/// child-process sources, the main queue) are never closed behind the loop's back and have no
/// witness.
final class DescriptorWitnesses {
  /// What the witness set holds for one fd number. The slots are indexed by the number: fd
  /// numbers are small and dense, and the check on the way from a handler to the next wait
  /// finds its slot without hashing (a dictionary and a set here, with the runtime's
  /// exclusivity checks, cost each delivery about 400 instructions more, callgrind).
  private struct Slot {
    /// The pin on this number: the witness its sources hold (0: none).
    var witness: UInt64 = 0
    /// Sources made for the pinned file on this number (several may watch one file).
    var holders: Int32 = 0
    /// The pin of an earlier file may linger on this number (see the type).
    var lingering = false
  }

  /// The witness set; replaced by a rebuild.
  @exclusivity(unchecked) private(set) var set: Epoll
  /// By fd number, as far as the highest number pinned so far. The fields below, as the
  /// whole type, are guarded by the loop's lock (so the runtime's exclusivity checks, on the
  /// path of every delivery, are left out).
  @exclusivity(unchecked) private var slots: [Slot] = []
  @exclusivity(unchecked) private var pinned = 0
  @exclusivity(unchecked) private var lingering = 0
  /// Device and inode of each file pinned on a lingering number.
  @exclusivity(unchecked) private var identities: [Int32: FileIdentity] = [:]
  @exclusivity(unchecked) private var nextID: UInt64 = 1
  /// How many times the set was rebuilt (for tests).
  @exclusivity(unchecked) private(set) var rebuilds = 0
  /// The one device and inode every anonymous-inode file reports (an epoll set is one).
  private let anonymousInode: FileIdentity?

  init() throws(LoopError) {
    set = try Epoll()
    anonymousInode = FileIdentity(of: set.fd)
  }

  /// Pins the file `fd` names now for a source added for the first time, and returns the
  /// source's witness. A source on a file already pinned on this number shares its witness.
  /// `makeSet` gives the new set a rebuild needs. Throws as `epoll_ctl(ADD)` does for the
  /// number (closed, negative, a regular file, …).
  func pin(_ fd: Int32, makeSet: () throws(LoopError) -> Epoll) throws(LoopError) -> UInt64 {
    guard fd >= 0 else {
      throw .system(SystemError(operation: "epoll_ctl(ADD)", subject: "fd \(fd)", errno: EBADF))
    }
    let index = Int(fd)
    if index >= slots.count { slots += repeatElement(Slot(), count: index + 1 - slots.count) }
    if slots[index].witness != 0 {
      if confirms(fd, slots[index].witness) {
        slots[index].holders += 1
        return slots[index].witness
      }
      // The number names another file now; the old pin's sources no longer match, and the
      // pin may linger with its file.
      unpin(fd)
      markLingering(fd)
    }
    let identity = slots[index].lingering ? FileIdentity(of: fd) : nil
    // Device and inode cannot tell anonymous-inode files apart (the witness set is one):
    // pinned over a pin that may linger, such a file would share its number's answers with
    // the lingering one. A new set first, then.
    if let identity, identity == anonymousInode { try rebuild(makeSet: makeSet) }
    let id = nextID
    do throws(LoopError) {
      try set.add(fd, events: 0, token: id)
    } catch .system(let failure) where failure.errno == EEXIST {
      // A file whose pin lingers came back to its number: only a new set sheds that pin.
      try rebuild(makeSet: makeSet)
      try set.add(fd, events: 0, token: id)
    }
    nextID += 1
    slots[index].witness = id
    slots[index].holders = 1
    pinned += 1
    if slots[index].lingering { identities[fd] = identity }
    if lingering > max(64, pinned) { try? rebuild(makeSet: makeSet) }
    return id
  }

  /// Whether `fd` still names the file that `witness` pinned. One `epoll_ctl(ADD)`, and an
  /// `fstat` where an earlier pin may linger.
  func names(_ fd: Int32, witness: UInt64) -> Bool {
    guard fd >= 0, Int(fd) < slots.count, slots[Int(fd)].witness == witness else { return false }
    return confirms(fd, witness)
  }

  /// `names` for the pin on `fd`, asked of the kernel.
  private func confirms(_ fd: Int32, _ witness: UInt64) -> Bool {
    switch set.probe(fd, token: witness) {
    case .holds: break
    case .other: return false
    case .otherLeftRegistered:
      markLingering(fd)
      return false
    }
    guard slots[Int(fd)].lingering else { return true }
    guard let identity = identities[fd] else { return false }
    return FileIdentity(of: fd) == identity
  }

  /// One holder of `witness` lets go (its source was invalidated, or its first add failed);
  /// the last one takes the pin out, or leaves it lingering if its number names another file.
  func release(_ fd: Int32, witness: UInt64) {
    guard fd >= 0, Int(fd) < slots.count, slots[Int(fd)].witness == witness else { return }
    slots[Int(fd)].holders -= 1
    guard slots[Int(fd)].holders == 0 else { return }
    unpin(fd)
    // By number: this removes the pin if the number still names its file, and nothing else
    // (any other registration under the number is of a file that is not there now).
    if !set.remove(fd) { markLingering(fd) }
  }

  private func unpin(_ fd: Int32) {
    slots[Int(fd)].witness = 0
    slots[Int(fd)].holders = 0
    if slots[Int(fd)].lingering { identities[fd] = nil }
    pinned -= 1
  }

  private func markLingering(_ fd: Int32) {
    guard !slots[Int(fd)].lingering else { return }
    slots[Int(fd)].lingering = true
    lingering += 1
  }

  /// Replaces the set with one holding every pin still confirmed: nothing lingers after it.
  /// A pin whose number names another file now is dropped, and its sources no longer match.
  /// If the kernel refuses the new set a pin for want of memory, nothing changes.
  private func rebuild(makeSet: () throws(LoopError) -> Epoll) throws(LoopError) {
    let fresh = try makeSet()
    var dropped: [Int32] = []
    for index in slots.indices where slots[index].witness != 0 {
      let fd = Int32(index)
      guard confirms(fd, slots[index].witness) else {
        dropped.append(fd)
        continue
      }
      do throws(LoopError) {
        try fresh.add(fd, events: 0, token: slots[index].witness)
      } catch .system(let failure) where [EBADF, EPERM].contains(failure.errno) {
        dropped.append(fd)  // closed since the look above: its sources no longer match
      } catch {
        // The kernel refused for want of memory or watches, not because the file changed:
        // the old set stays, and with it every pin.
        fresh.close()
        throw error
      }
    }
    for fd in dropped { unpin(fd) }
    for index in slots.indices { slots[index].lingering = false }
    lingering = 0
    identities = [:]
    set.close()
    set = fresh
    rebuilds += 1
  }

  func close() { set.close() }
}
