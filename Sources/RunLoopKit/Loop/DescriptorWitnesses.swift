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
/// epoll set of the loop's own that nobody waits on (the witness set): `epoll_ctl(MOD)` on it
/// by the number succeeds only while the number names a file pinned under that number.
///
/// A pin whose number was closed while its file stayed open elsewhere (a `dup`, a child
/// process) cannot be removed by that number — `DEL` names whatever file the number names
/// now — so it may linger, and would answer for its file if that file ever came back to the
/// number. Such numbers are kept in `lingering`; there a pin is also compared with the
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
  private struct Witness {
    let id: UInt64
    /// Sources made for this file on this number (several may watch one file).
    var holders: Int
    /// The file's device and inode, read when its number was a lingering one (nil otherwise).
    let identity: FileIdentity?
  }

  /// The witness set; replaced by a rebuild.
  private(set) var set: Epoll
  private var witnesses: [Int32: Witness] = [:]
  /// Numbers where the pin of an earlier file may linger (see the type).
  private var lingering: Set<Int32> = []
  private var nextID: UInt64 = 1
  /// How many times the set was rebuilt (for tests).
  private(set) var rebuilds = 0
  /// The one device and inode every anonymous-inode file reports (an epoll set is one).
  private let anonymousInode: FileIdentity?

  init() throws(LoopError) {
    set = try Epoll()
    anonymousInode = FileIdentity(of: set.fd)
  }

  /// Pins the file `fd` names now for a source added for the first time, and returns the
  /// source's witness. A source on a file already pinned on this number shares its witness.
  /// `makeSet` gives the new set a rebuild needs. Throws as `epoll_ctl(ADD)` does for the
  /// number (closed, a regular file, …).
  func pin(_ fd: Int32, makeSet: () throws(LoopError) -> Epoll) throws(LoopError) -> UInt64 {
    if var witness = witnesses[fd] {
      if names(fd, witness) {
        witness.holders += 1
        witnesses[fd] = witness
        return witness.id
      }
      // The number names another file now; the old pin's sources no longer match, and the
      // pin may linger with its file.
      witnesses[fd] = nil
      lingering.insert(fd)
    }
    let identity = lingering.contains(fd) ? FileIdentity(of: fd) : nil
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
    witnesses[fd] = Witness(id: id, holders: 1, identity: identity)
    if lingering.count > max(64, witnesses.count) { try? rebuild(makeSet: makeSet) }
    return id
  }

  /// Whether `fd` still names the file that `witness` pinned. One `epoll_ctl(MOD)`, and an
  /// `fstat` where an earlier pin may linger.
  func names(_ fd: Int32, witness: UInt64) -> Bool {
    guard let pinned = witnesses[fd], pinned.id == witness else { return false }
    return names(fd, pinned)
  }

  private func names(_ fd: Int32, _ witness: Witness) -> Bool {
    guard set.isRegistered(fd, events: 0, token: witness.id) else { return false }
    guard lingering.contains(fd) else { return true }
    return witness.identity != nil && FileIdentity(of: fd) == witness.identity
  }

  /// One holder of `witness` lets go (its source was invalidated, or its first add failed);
  /// the last one takes the pin out, or leaves it lingering if its number names another file.
  func release(_ fd: Int32, witness: UInt64) {
    guard var pinned = witnesses[fd], pinned.id == witness else { return }
    pinned.holders -= 1
    if pinned.holders > 0 {
      witnesses[fd] = pinned
      return
    }
    witnesses[fd] = nil
    // By number: this removes the pin if the number still names its file, and nothing else
    // (any other registration under the number is of a file that is not there now).
    if !set.remove(fd) { lingering.insert(fd) }
  }

  /// Replaces the set with one holding every pin still confirmed: nothing lingers after it.
  /// A pin whose number names another file now is dropped, and its sources no longer match.
  private func rebuild(makeSet: () throws(LoopError) -> Epoll) throws(LoopError) {
    let fresh = try makeSet()
    var kept: [Int32: Witness] = [:]
    for (fd, witness) in witnesses where names(fd, witness) {
      do throws(LoopError) {
        try fresh.add(fd, events: 0, token: witness.id)
      } catch .system(let failure) where [EBADF, EPERM].contains(failure.errno) {
        continue  // closed since the look above: its sources no longer match
      } catch {
        // The kernel refused for want of memory or watches, not because the file changed:
        // the old set stays, and with it every pin.
        fresh.close()
        throw error
      }
      kept[fd] = Witness(id: witness.id, holders: witness.holders, identity: nil)
    }
    set.close()
    set = fresh
    witnesses = kept
    lingering = []
    rebuilds += 1
  }

  func close() { set.close() }
}
