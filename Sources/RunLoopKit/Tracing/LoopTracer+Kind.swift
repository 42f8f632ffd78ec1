/// What a `LoopTracer` records: the kinds of event, how a wake-up reached a sleeping loop,
/// and what ended a sleep.
extension LoopTracer {
  /// What happened.
  public enum Kind: Sendable, Equatable {
    /// A point an observer is told about: entry, beforeTimers, beforeSources, beforeWaiting,
    /// afterWaiting, exit. Recorded whether or not any observer is registered.
    case activity(Loop.Activity)
    /// A batch of `perform` blocks ran.
    case blocks(count: Int)
    /// A signalled manual source was performed.
    case manualSource(String)
    /// A timer fired, `lateness` after its fire date.
    case timer(String, lateness: Duration)
    /// A descriptor source's handler ran with what the descriptor reported.
    case descriptor(String, fd: Int32, events: DescriptorSource.Events)
    /// A port's handler took its messages.
    case port(String)
    /// `Loop.main` served the main dispatch queue: `DispatchQueue.main` blocks and
    /// `@MainActor` jobs ran.
    case mainQueue
    /// The loop blocked in the kernel (`epoll_wait`, or its futex when the mode watches no
    /// descriptor); the event's duration is how long it slept.
    case slept(wokenBy: [WakeCause])
    /// Under a spinning `Loop.WaitPolicy`, the loop polled instead of sleeping; the duration
    /// is how long it spun. No causes: the window ran out (a sleep follows, unless the
    /// deadline has passed).
    case spun(wokenBy: [WakeCause])
    /// A `run` call returned. A run of an empty mode returns `.finished` without any entry.
    case returned(Loop.RunResult)
    /// An observer was told of an activity (its `order` tells apart several told of the same
    /// one); the duration is its callout. Follows the activity's own event.
    case observer(Loop.Activity, order: Int)
    /// Another thread signalled one of the loop's manual sources (`ManualSource.signal()`);
    /// carries the source's label. An instant, recorded on the sending thread (`threadID`),
    /// stamped before the signal is published (so never after the perform it causes), with
    /// the loop's mode and depth just after (depth 0: the loop was not running).
    case signalSent(String)
    /// Another thread woke the sleeping loop: a post (`perform`, `ResidentThread.perform`)
    /// that found it asleep, `wakeUp()`, `stop()`, `signalAndWake()`, or a change the
    /// sleeping loop must see (a timer or descriptor added to a loop asleep on its futex, a
    /// signalled source or a common mode added to the mode it runs). An instant on the
    /// sending thread, stamped before the wake-up is sent, as `signalSent`. A wake-up of a
    /// busy loop is a flag its next wait reads, not a message, and is not recorded.
    case wakeUpSent(WakeUpRoute)
  }

  /// How a wake-up reached a sleeping loop. (`CFRunLoopWakeUp` sends a Mach message to the
  /// loop's wake-up port; a Linux loop has two ways in.)
  public enum WakeUpRoute: Sendable, Equatable, CustomStringConvertible {
    /// A write to the loop's eventfd, in the epoll set of the mode it sleeps in.
    case eventfd
    /// A wake of the futex the loop sleeps on when its mode watches no descriptor.
    case futex

    /// `eventfd write` or `futex wake`.
    public var description: String {
      switch self {
      case .eventfd: "eventfd write"
      case .futex: "futex wake"
      }
    }
  }

  /// What ended a sleep.
  public enum WakeCause: Sendable, Equatable, CustomStringConvertible {
    /// A `LoopPort` got a message; carries the port's label, or `port`.
    case port(String)
    /// A descriptor source became ready; carries its label (or `fd N`) and its descriptor.
    case descriptor(String, fd: Int32)
    /// The mode's timerfd: a timer is due.
    case timer
    /// The loop's wake-up eventfd: `wakeUp()`, `perform`, `stop()` or `signalAndWake()`.
    case wakeUp
    /// Nothing: the run's deadline passed.
    case deadline
    /// The main dispatch queue got work (`DispatchQueue.main`, a `@MainActor` job); only
    /// `Loop.main` watches it.
    case mainQueue
    /// A descriptor the loop no longer has a source for (its fd was closed while the file
    /// stayed open elsewhere); the loop rebuilds that mode's epoll set.
    case unregisteredDescriptor

    /// A short phrase for timelines, such as `timer`, `wake-up` or a port's label.
    public var description: String {
      switch self {
      case .port(let name): name == "port" ? name : "port \"\(name)\""
      case .descriptor(let name, let fd): name == "fd \(fd)" ? name : "\"\(name)\" (fd \(fd))"
      case .timer: "timer"
      case .wakeUp: "wake-up"
      case .deadline: "deadline"
      case .mainQueue: "main queue"
      case .unregisteredDescriptor: "an unregistered descriptor"
      }
    }
  }
}
