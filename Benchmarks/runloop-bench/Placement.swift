import Foundation

/// Where the posting thread and the woken thread run while a wake is measured. Pinned to one
/// CPU, the woken thread runs where the poster is (the wake is an in-CPU switch); pinned apart,
/// it is woken on an idle CPU (an inter-processor interrupt, and on a VM an idle vCPU that the
/// host must schedule again). Unpinned, the scheduler chooses, and the figure mostly says what
/// it chose, which is why the pinned placements are the ones compared.
enum Placement: String, Codable, CaseIterable {
  case sameCPU = "same CPU"
  case crossCPU = "different CPUs"
  case unpinned = "unpinned"

  /// The poster's CPU, or -1 for any.
  var posterCPU: Int32 { self == .unpinned ? -1 : 0 }
  /// The woken thread's CPU, or -1 for any.
  var targetCPU: Int32 {
    switch self {
    case .sameCPU: 0
    case .crossCPU: 1
    case .unpinned: -1
    }
  }

  var explanation: String {
    switch self {
    case .sameCPU: "poster and woken thread both pinned to CPU 0"
    case .crossCPU: "poster pinned to CPU 0, woken thread to CPU 1"
    case .unpinned: "neither pinned: the scheduler places the woken thread"
    }
  }

  /// The placements this machine can make: the pinned pair needs two CPUs.
  static var available: [Placement] {
    ProcessInfo.processInfo.activeProcessorCount >= 2 ? allCases : [.unpinned]
  }
}
