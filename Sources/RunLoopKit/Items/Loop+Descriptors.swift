import CRunLoopShims

/// The descriptor phase of a pass (`handleDescriptors`): events the wait returned, handed to
/// their sources by order, with the checks that keep a closed or reused fd from reaching the
/// wrong source or spinning the loop, and the epoll-set rebuild that sheds what `DEL` cannot.
extension Loop {
  /// Calls the handler of each ready descriptor source, by order. Returns whether any ran.
  func handleDescriptors(_ ready: [Epoll.Event], in mode: ModeState, onlyOne: Bool) -> Bool {
    guard !ready.isEmpty else { return false }
    let (deliveries, generation) = lock.withLock {
      (collectDeliveriesLocked(ready, in: mode), waitGeneration)
    }
    let sink = traceSink(mode.mode)
    var handled = false
    for delivery in deliveries {
      guard let handler = lock.withLock({ takeHandlerLocked(delivery, generation, in: mode) })
      else { continue }
      let events =
        delivery.stale
        ? [.error, .invalidDescriptor] : DescriptorSource.events(fromEpoll: delivery.raw)
      let began = sink?.now
      handler(delivery.source, events)
      sink?.record(delivery.source.traceKind(events), since: began)
      // A stale report tells the source about its own misuse; it is not the source firing,
      // so it neither counts as a handled source nor ends a pass that stops after one.
      if delivery.stale { continue }
      handled = true
      if onlyOne { break }
    }
    return handled
  }

  /// Attributes each event to its source, by order, with stale reports first (they are made
  /// even when the pass stops after one source).
  private func collectDeliveriesLocked(_ ready: [Epoll.Event], in mode: ModeState) -> [Delivery] {
    var deliveries: [Delivery] = []
    var stale: [Delivery] = []
    var unattributed = false
    for event in ready {
      guard let source = mode.descriptors[event.token],
        source.registrations.contains(where: { $0.token == event.token && !$0.parked })
      else {
        // An event we cannot attribute (or one for a parked registration) comes from a
        // registration the kernel still holds for a file whose fd number we no longer own:
        // its fd was closed while the file stayed open elsewhere.
        unattributed = true
        continue
      }
      guard isCurrentLocked(source, token: event.token, in: mode) else {
        markStaleLocked(source, token: event.token, in: mode)
        stale.append(Delivery(source: source, token: event.token, raw: 0, stale: true))
        continue
      }
      deliveries.append(Delivery(source: source, token: event.token, raw: event.events))
    }
    // epoll_ctl(DEL) cannot name a file whose fd number we no longer own, so one rebuild
    // sheds all of them, and finds any other registration gone stale on the way.
    if unattributed || !stale.isEmpty {
      stale += rebuildEpollSetLocked(mode).map {
        Delivery(source: $0, token: $1, raw: 0, stale: true)
      }
    }
    let byOrder = { (a: Delivery, b: Delivery) in a.source.order < b.source.order }
    return stale.sorted(by: byOrder) + deliveries.sorted(by: byOrder)
  }

  /// The handler to call for `delivery` now, or nil if it must be skipped.
  private func takeHandlerLocked(
    _ delivery: Delivery, _ generation: UInt64, in mode: ModeState
  ) -> DescriptorSource.Handler? {
    // A nested run inside an earlier handler has waited (and maybe served this source) since
    // these events were read; epoll is level-triggered, so whatever is still ready will be
    // reported again on the next wait. (A stale fd is reported now or never.)
    guard delivery.stale || waitGeneration == generation else { return nil }
    // An earlier handler may have removed or invalidated this source.
    let source = delivery.source
    guard mode.descriptors[delivery.token] === source, let handler = source.handler else {
      return nil
    }
    if !delivery.stale {
      if delivery.raw & (CRL_EPOLLHUP | CRL_EPOLLERR) != 0 {
        parkLocked(source, token: delivery.token, in: mode)
      }
      counters.sourcesHandled += 1
    }
    return handler
  }

  /// One event to hand to a descriptor source: its epoll bits, or a stale-descriptor report.
  struct Delivery {
    let source: DescriptorSource
    let token: UInt64
    let raw: UInt32
    var stale = false
  }

  /// Whether a source's registration still watches the file its fd number names now. The
  /// kernel keeps a registration for as long as its *file* is open, not its fd: closed while a
  /// `dup` (or a child process) holds the file, the registration goes on reporting a file
  /// the source can no longer read, level-triggered, on every pass — a 100 % CPU spin. The
  /// check costs one epoll_ctl per event; ports and the main queue skip it.
  func isCurrentLocked(
    _ source: DescriptorSource, token: UInt64, in mode: ModeState
  ) -> Bool {
    // Ports' eventfds are the library's, the main queue's is libdispatch's: never closed.
    // (Checked first so their deliveries skip the mask read too.)
    if source.isPort || source.isMainQueue { return true }
    return currentMaskLocked(source, token: token, in: mode) != nil
  }

  /// `isCurrentLocked` that also hands back the source's epoll mask (read once, under
  /// `binding.lock`), or nil when the registration is stale.
  private func currentMaskLocked(
    _ source: DescriptorSource, token: UInt64, in mode: ModeState
  ) -> UInt32? {
    let fd = source.fileDescriptor
    let neverClosed = source.isPort || source.isMainQueue
    // A newer source owns the number in this set, so this registration's file is not fd's.
    guard neverClosed || mode.tokenForDescriptor[fd] == token else { return nil }
    let mask = source.binding.lock.withLock { source.epollMaskUnlocked }
    guard neverClosed || mode.epoll.isRegistered(fd, events: mask, token: token) else {
      return nil
    }
    return mask
  }

  /// Parks a registration whose fd no longer names its file, for good (`setInterest` refuses
  /// a stale source). The caller rebuilds the epoll set to shed it: epoll_ctl(DEL) would name
  /// whatever file the number points to now, or fail.
  private func markStaleLocked(_ source: DescriptorSource, token: UInt64, in mode: ModeState) {
    guard let index = source.registrations.firstIndex(where: { $0.token == token }) else { return }
    source.registrations[index].parked = true
    source.registrations[index].stale = true
    if mode.tokenForDescriptor[source.fileDescriptor] == token {
      mode.tokenForDescriptor[source.fileDescriptor] = nil
    }
    counters.staleDescriptors += 1
  }

  /// Takes a hung-up or failed descriptor out of the epoll set so it cannot wake the loop
  /// again and again; `setInterest` puts it back.
  private func parkLocked(_ source: DescriptorSource, token: UInt64, in mode: ModeState) {
    guard let index = source.registrations.firstIndex(where: { $0.token == token }),
      !source.registrations[index].parked
    else { return }
    source.registrations[index].parked = true
    if mode.tokenForDescriptor[source.fileDescriptor] == token {
      mode.epoll.remove(source.fileDescriptor)
    }
  }

  /// Replaces the mode's epoll set with a fresh one holding the wake-up eventfd, the timerfd
  /// and every live registration whose fd number is still ours. The loop may be asleep in the
  /// old set (it holds a reference to it), so it is woken to move over. Returns the
  /// registrations it found stale and parked, so the caller can report them.
  func rebuildEpollSetLocked(_ mode: ModeState) -> [(DescriptorSource, UInt64)] {
    var live: [(fd: Int32, mask: UInt32, token: UInt64)] = []
    var stale: [(DescriptorSource, UInt64)] = []
    for (token, source) in mode.descriptors {
      guard mode.tokenForDescriptor[source.fileDescriptor] == token,
        source.registrations.contains(where: { $0.token == token && !$0.parked })
      else { continue }
      // Re-adding by number would quietly move a source whose fd was closed and reused onto
      // the new file; one whose number no longer names its file stays out, parked as stale.
      guard let mask = currentMaskLocked(source, token: token, in: mode) else {
        markStaleLocked(source, token: token, in: mode)
        stale.append((source, token))
        continue
      }
      live.append((source.fileDescriptor, mask, token))
    }
    let refused: [UInt64]
    do {
      refused = try mode.replaceEpollSet(wakeFD: wakeFD, registrations: live)
    } catch {
      preconditionFailure("rebuilding the epoll set of mode \(mode.mode) failed: \(error)")
    }
    // Descriptors closed without removing their source can no longer be registered: they
    // are dead, so they stay out of the set like a hung-up one.
    for token in refused {
      guard let source = mode.descriptors[token],
        let index = source.registrations.firstIndex(where: { $0.token == token })
      else { continue }
      source.registrations[index].parked = true
    }
    epollRebuilds += 1
    _ = requestWakeLocked()  // on the loop thread: sets the flag, never writes
    return stale
  }
}
