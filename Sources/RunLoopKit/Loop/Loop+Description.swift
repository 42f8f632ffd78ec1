/// A dump of a loop's state, like the description CFRunLoop prints (`CFShow(runLoop)`):
/// each mode with its manual sources, descriptor sources, timers (next fire) and observers.
extension Loop: CustomDebugStringConvertible {
  /// Several lines: the loop's state, then each mode with its items. Safe from any thread.
  public var debugDescription: String {
    lock.withLock {
      var lines: [String] = []
      let running = frames.map(\.mode.name).joined(separator: " > ")
      let queued = queuedBlockCountLocked
      lines.append(
        "<Loop \(threadDescription)\(tornDown ? " torn down" : "")> "
          + "waiting: \(sleeping), running: [\(running)], queued blocks: \(queued)")
      lines.append(
        "  common modes: \(commonModeNames.map(\.name)), common items: \(commonItems.count)")
      for name in modeStates.keys.sorted(by: { $0.name < $1.name }) {
        guard let mode = modeStates[name] else { continue }
        lines.append("  mode \"\(name)\" (epoll fd \(mode.epoll.fd), timerfd \(mode.timerFD.fd))")
        let groups: [(String, [any LoopItem])] = [
          ("manual sources", mode.manualSources.inOrder),
          ("descriptor sources", mode.descriptors.entries.sorted { $0.key < $1.key }.map(\.value)),
          ("timers", mode.timers.entries.sorted { $0.precedes($1) }.map(\.timer)),
          ("observers", mode.observers),
        ]
        for (title, items) in groups {
          lines.append("    \(title): \(items.count)")
          lines += items.map { "      " + $0.describeLocked() }
        }
      }
      return lines.joined(separator: "\n")
    }
  }
}

extension Loop {
  /// Blocks queued and not run yet, whatever their mode.
  var queuedBlockCountLocked: Int { blocks.count + deferredBlocks.count + posted.waitingCount }
}
