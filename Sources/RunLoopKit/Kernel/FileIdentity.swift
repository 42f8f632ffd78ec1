import Glibc

/// A file's device and inode, as `fstat` reports them for a descriptor. Not unique among
/// anonymous-inode files (eventfds, timerfds, epoll sets share one inode): see
/// `DescriptorWitnesses` for what tells those apart.
struct FileIdentity: Equatable {
  let device: UInt64
  let inode: UInt64

  /// Nil when `fstat` fails (the descriptor is closed).
  init?(of fd: Int32) {
    var status = stat()
    guard fstat(fd, &status) == 0 else { return nil }
    device = UInt64(status.st_dev)
    inode = UInt64(status.st_ino)
  }
}
