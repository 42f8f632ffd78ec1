import Glibc

/// What kind of file a descriptor names, in words for error messages ("a character device").
///
/// epoll refuses some files with EPERM, and the fix depends on what the file is: a regular file
/// is always ready and should be read directly, a device such as `/dev/null` simply has no poll
/// support. Asked only after a call failed, never on a hot path.
enum FileKind {
  /// The kind of file `fd` names now, or nil when `fstat` cannot tell (the fd is closed).
  static func describe(_ fd: Int32) -> String? {
    var status = stat()
    guard fstat(fd, &status) == 0 else { return nil }
    return switch status.st_mode & S_IFMT {
    case S_IFREG: "a regular file"
    case S_IFDIR: "a directory"
    case S_IFCHR: "a character device"
    case S_IFBLK: "a block device"
    case S_IFIFO: "a pipe"
    case S_IFSOCK: "a socket"
    case S_IFLNK: "a symbolic link"
    default: "a file of unknown type"
    }
  }
}
