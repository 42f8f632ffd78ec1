import CRunLoopShims

/// The descriptor phase of a pass (`handleDescriptors`): events the wait returned, handed to
/// their sources by order, with the checks that keep a closed or reused fd from reaching the
/// wrong source or spinning the loop, and the epoll-set rebuild that sheds what `DEL` cannot.
///
/// Why a delivery needs no syscall on the way to its handler. The kernel keeps a registration
/// for as long as its *file* is open, not its fd: a source whose fd was closed while a `dup`
/// (or a child process) holds the file goes on being reported, level-triggered, for a file its
/// handler can no longer read — a 100 % CPU spin, unless the loop notices. Asking the kernel
/// (`Epoll.probe`, an `epoll_ctl`) before every delivery put ~0.5 µs on the path
/// from wake-up to handler. The loop asks after the call instead, before its next wait
/// (`checkCalledSourcesLocked`): a registration confirmed there is delivered unchecked when it
/// next reports (`DescriptorRegistration.deliverUnchecked`). A report that finds the source not
/// confirmed since its last call — one reported again before any wait, a busy fd — is checked
/// first, as is the first report after an add, a new interest or a rebuild, so a close before
/// it is reported as `invalidDescriptor`. A source closed after a call gets at most one more
/// (plain) call and is then parked, whoever drained its file meanwhile and in however many
/// modes it is (a call marks its registrations in the other modes for a check on their next
/// report); it never spins. Ports and the library's own descriptors are never checked: the
/// library closes them only after removing them.
extension Loop {
  /// Calls the handler of each ready descriptor source, by order. Returns whether any ran.
  /// `woke` is what the wait returned: its events, the wait count it brought the loop to, and
  /// whether the mode should shed the registrations it could not remove now, even with no
  /// event to handle (`WakeResult.shedDue`).
  func handleDescriptors(_ woke: consuming WakeResult, in mode: ModeState, onlyOne: Bool) -> Bool {
    // The events' buffer goes back for the next wait to fill: a wake allocates no list.
    defer {
      if woke.ready.capacity > 0 {
        var ready = woke.ready
        woke.ready = []
        ready.removeAll(keepingCapacity: ready.capacity <= 64)
        readyBuffer = ready
      }
    }
    guard !woke.ready.isEmpty || woke.shedDue else { return false }
    let generation = woke.waitCount
    // A buffer kept from the last pass (a nested run in a handler takes a fresh one).
    var deliveries = deliveryBuffer
    deliveryBuffer = []
    // The first handler is taken under the lock that collected it: one lock, not two, between
    // a wake and its handler. (Locked by hand: a closure handed out of the generic `withLock`
    // is re-abstracted, which allocates a thunk on every delivery.)
    lock.lock()
    collectDeliveriesLocked(woke, into: &deliveries, in: mode)
    var taken = deliveries.isEmpty ? nil : takeHandlerLocked(deliveries[0], generation, in: mode)
    lock.unlock()
    let sink = deliveries.isEmpty ? nil : traceSink(mode.mode)
    let watched = !deliveries.isEmpty && watchingStalls()
    var handled = false
    for index in deliveries.indices {
      let delivery = deliveries[index]
      if index > 0 {
        lock.lock()
        taken = takeHandlerLocked(delivery, generation, in: mode)
        lock.unlock()
      }
      guard let (source, handler) = taken.take() else { continue }
      let events =
        delivery.stale
        ? [.error, .invalidDescriptor] : DescriptorSource.events(fromEpoll: delivery.raw)
      let began = sink?.now
      if watched {
        calloutBoard.begin(
          source.stallKind, label: source.stallLabel, mode: mode.mode, depth: frames.count)
      }
      handler(source, events)
      if watched { calloutBoard.end() }
      sink?.record(source.traceKind(events), since: began)
      // A stale report tells the source about its own misuse; it is not the source firing,
      // so it neither counts as a handled source nor ends a pass that stops after one.
      if delivery.stale { continue }
      handled = true
      if onlyOne { break }
    }
    deliveries.removeAll(keepingCapacity: deliveries.capacity <= 64)
    deliveryBuffer = deliveries
    return handled
  }

  /// Attributes each event of `woke` to its source, by order, with stale reports first (they
  /// are made even when the pass stops after one source).
  private func collectDeliveriesLocked(
    _ woke: WakeResult, into deliveries: inout [Delivery], in mode: ModeState
  ) {
    // Stale registrations found outside a pass are reported first, as those found now are.
    var stale: [Delivery] = []
    if !mode.staleToReport.isEmpty {
      stale = mode.staleToReport.compactMap { token in
        mode.descriptors[token].map { Delivery(token: token, order: $0.order, stale: true) }
      }
      mode.staleToReport = []
    }
    let reportedBefore = stale.count
    var unattributed = false
    var parkedUnreported = false
    for event in woke.ready {
      // Read in place: attributing an event takes no reference to its source.
      let attribution =
        mode.descriptors.withSource(event.token) { source in
          attributeLocked(event, to: source, in: mode)
        } ?? .unwatched
      switch attribution {
      case .deliver(let delivery): deliveries.append(delivery)
      case .stale(let delivery): stale.append(delivery)
      case .staleAfterCall: parkedUnreported = true
      case .unwatched:
        // No source watches this token now. Either its registration was removed or let go
        // after this wait read the event (an earlier handler of this pass closed, invalidated
        // or parked the source: the event is stale, and dropped; if the kernel still holds
        // the registration, the next wait says so), or it was let go before this wait and
        // still reported: a registration that outlived its fd number, which only a new set
        // sheds.
        if mode.isLiveUntracked(event.token, reportedBy: woke.waitCount) { unattributed = true }
      }
    }
    // epoll_ctl(DEL) cannot name a file whose fd number we no longer own, so one rebuild
    // sheds all of them, and finds any other registration gone stale on the way.
    if unattributed || stale.count > reportedBefore || parkedUnreported || mode.shedDue {
      stale += rebuildEpollSetLocked(mode).map {
        Delivery(token: $1, order: $0.order, stale: true)
      }
    }
    let byOrder = { (a: Delivery, b: Delivery) in a.order < b.order }
    if deliveries.count > 1 { deliveries.sort(by: byOrder) }
    if !stale.isEmpty { deliveries = stale.sorted(by: byOrder) + deliveries }
  }

  /// What the descriptor phase makes of one event for `source`, the source its token names.
  private enum Attribution {
    case deliver(Delivery)
    /// The registration no longer watches the file its fd names: reported to the handler.
    case stale(Delivery)
    /// Stale, but the handler was called since the kernel last confirmed it: not reported.
    case staleAfterCall
    /// No registration of a source watches the token (removed, or parked).
    case unwatched
  }

  /// Attributes `event` to `source`, checking first (with the kernel) a registration not
  /// confirmed since its last call; a stale one is parked.
  private func attributeLocked(
    _ event: Epoll.Event, to source: DescriptorSource, in mode: ModeState
  ) -> Attribution {
    guard let index = source.registrations.firstIndex(where: { $0.token == event.token }),
      !source.registrations[index].parked
    else { return .unwatched }
    // Read in place: a copy of the registration would retain and release its mode.
    let called = source.registrations[index].calledSinceConfirmed
    let check = !source.registrations[index].deliverUnchecked
    if check && !source.ownsDescriptor { deliveryChecks += 1 }
    let current =
      check
      ? isCurrentLocked(source, token: event.token, in: mode)
      : source.ownsDescriptor || !source.registrations[index].superseded
    guard current else {
      markStaleLocked(source, token: event.token, in: mode)
      // Reported only if the handler has not been called since the kernel last confirmed
      // the fd: otherwise that call may already have been its one call after the close.
      if called { return .staleAfterCall }
      return .stale(Delivery(token: event.token, order: source.order, stale: true))
    }
    if check { source.registrations[index].calledSinceConfirmed = false }
    return .deliver(Delivery(token: event.token, order: source.order, raw: event.events))
  }

  /// Before a wait: asks the kernel about each registration whose handler was called since
  /// the mode's last wait. One still watching its file is confirmed (its next report goes to
  /// the handler unchecked); a stale one is parked without another call (it had its call
  /// since the close) and shed by the rebuild its next report sets off.
  func checkCalledSourcesLocked(in mode: ModeState) {
    guard !mode.calledSinceWait.isEmpty else { return }
    for token in mode.calledSinceWait {
      guard let source = mode.descriptors[token],
        let index = source.registrations.firstIndex(where: { $0.token == token }),
        !source.registrations[index].parked, source.registrations[index].calledSinceConfirmed
      else { continue }
      if isCurrentLocked(source, token: token, in: mode) {
        source.registrations[index].calledSinceConfirmed = false
        source.registrations[index].deliverUnchecked = true
      } else {
        markStaleLocked(source, token: token, in: mode)
      }
    }
    mode.calledSinceWait.removeAll(keepingCapacity: mode.calledSinceWait.capacity <= 64)
  }

  /// The source of `delivery` and the handler to call now, or nil if it must be skipped.
  private func takeHandlerLocked(
    _ delivery: Delivery, _ generation: UInt64, in mode: ModeState
  ) -> (DescriptorSource, DescriptorSource.Handler)? {
    // A nested run inside an earlier handler of this pass (a timer's or a descriptor's) has
    // waited (and maybe served this source) since these events were read; epoll is
    // level-triggered, so whatever is still ready will be reported again on the next wait.
    // (A stale fd is reported now or never.)
    guard delivery.stale || waitGeneration == generation,
      // An earlier handler may have removed this source from the mode (its token is then
      // gone from the table; tokens are never reused) or invalidated it.
      let source = mode.descriptors[delivery.token],
      let index = source.registrations.firstIndex(where: { $0.token == delivery.token }),
      // Found stale since it was collected (by the rebuild of the same pass): its stale report,
      // made first, was its one call.
      delivery.stale || !source.registrations[index].stale,
      let handler = source.handler
    else { return nil }
    if !delivery.stale {
      if delivery.raw & (CRL_EPOLLHUP | CRL_EPOLLERR) != 0 {
        parkLocked(source, token: delivery.token, in: mode)
      }
      counters.sourcesHandled += 1
      if !source.ownsDescriptor {
        // A call counts for the source, not for one mode: its registrations in other modes
        // are checked on their next report, so a close after this call gets no second call
        // there (the check before this mode's next wait covers this one).
        for other in source.registrations.indices {
          source.registrations[other].calledSinceConfirmed = true
          source.registrations[other].deliverUnchecked = false
        }
        mode.calledSinceWait.append(delivery.token)
      }
      if source.beforeNextWait != nil { drainsBeforeWait.append(source) }
    }
    return (source, handler)
  }

  /// One event to hand to a descriptor source: its epoll bits, or a stale-descriptor report.
  /// It names the registration by token, not the source: the mode's table holds the source
  /// (and no longer has it once it is removed), so collecting, sorting and dropping
  /// deliveries counts no references.
  struct Delivery {
    let token: UInt64
    /// The source's `order`, by which deliveries are sorted.
    let order: Int
    var raw: UInt32 = 0
    var stale = false
  }

  /// Whether a source's registration still watches the file its fd number names now: a
  /// newer source on the same number says no at no cost; otherwise the kernel is asked
  /// whether the number still names the source's file (one epoll_ctl on the loop's witness
  /// set: see `DescriptorWitnesses`). (Without asking, a registration is taken as current
  /// unless it was superseded: see the top of this file for when that is safe.)
  func isCurrentLocked(_ source: DescriptorSource, token: UInt64, in mode: ModeState) -> Bool {
    // Ports' eventfds are the library's, the main queue's is libdispatch's: never closed.
    if source.ownsDescriptor { return true }
    return currentMaskLocked(source, token: token, in: mode) != nil
  }

  /// `isCurrentLocked` that also hands back the source's epoll mask (read once, under
  /// `binding.lock`), or nil when the registration is stale. Always asks the kernel.
  private func currentMaskLocked(
    _ source: DescriptorSource, token: UInt64, in mode: ModeState
  ) -> UInt32? {
    // A newer source owns the number in this set, so this registration's file is not fd's.
    guard source.ownsDescriptor || mode.tokenForDescriptor[source.fileDescriptor] == token,
      namesOwnFileLocked(source)
    else { return nil }
    // The registration was made for the file the number still names, which is open: the
    // kernel still holds it (a registration goes only with its file's last close).
    return source.binding.lock.withLock { source.epollMaskUnlocked }
  }

  /// Parks a registration whose fd no longer names its file, for good (`setInterest` refuses
  /// a stale source). The caller rebuilds the epoll set to shed it: epoll_ctl(DEL) would name
  /// whatever file the number points to now, or fail.
  func markStaleLocked(_ source: DescriptorSource, token: UInt64, in mode: ModeState) {
    guard let index = source.registrations.firstIndex(where: { $0.token == token }) else { return }
    source.registrations[index].parked = true
    source.registrations[index].stale = true
    if mode.tokenForDescriptor[source.fileDescriptor] == token {
      mode.tokenForDescriptor[source.fileDescriptor] = nil
    }
    mode.untrackedTokens[token] = waitGeneration
    counters.staleDescriptors += 1
  }

  /// Takes a hung-up or failed descriptor out of the epoll set so it cannot wake the loop
  /// again and again; `setInterest` puts it back.
  private func parkLocked(_ source: DescriptorSource, token: UInt64, in mode: ModeState) {
    guard let index = source.registrations.firstIndex(where: { $0.token == token }),
      !source.registrations[index].parked
    else { return }
    source.registrations[index].parked = true
    // Not removable by its number: that number names another file now, so the registration
    // is stale for good (`setInterest` refuses it), whatever later rebuilds forget.
    if !mode.unregister(source.fileDescriptor, token: token, waitCount: waitGeneration) {
      source.registrations[index].stale = true
    }
  }

  /// Replaces the mode's epoll set with a fresh one holding the wake-up eventfd, the timerfd
  /// and every live registration whose fd number is still ours. Returns the registrations it
  /// found stale and parked, so the caller can report them. Runs on the loop's thread, between
  /// waits, so nothing sleeps in the old set, which closes with its last reference; or, rarely,
  /// on the thread of an add that must shed a leftover registration (`registerLocked`), which
  /// then wakes a loop asleep in the old set (the sleep holds that set until it returns).
  ///
  /// When no new set can be made, the loop's spare one is used (made with its first
  /// descriptor source), so a rebuild works even when the process is out of descriptors; the
  /// spare is made again right after, from the number the old set just gave back. When no
  /// set can be had at all, the old one stays, the mode degrades to polling it between short
  /// sleeps (`ModeState.rebuildFailed`), and every pass tries again until one succeeds.
  func rebuildEpollSetLocked(_ mode: ModeState) -> [(DescriptorSource, UInt64)] {
    var live: [(fd: Int32, mask: UInt32, token: UInt64)] = []
    var stale: [(DescriptorSource, UInt64)] = []
    for (token, source) in mode.descriptors.entries {
      guard mode.tokenForDescriptor[source.fileDescriptor] == token,
        source.registrations.contains(where: { $0.token == token && !$0.parked })
      else { continue }
      // Re-adding by number would quietly move a source whose fd was closed and reused onto
      // the new file; one whose number no longer names its file stays out, parked as stale.
      let index = source.registrations.firstIndex { $0.token == token }
      guard let mask = currentMaskLocked(source, token: token, in: mode) else {
        let called = index.map { source.registrations[$0].calledSinceConfirmed } ?? false
        markStaleLocked(source, token: token, in: mode)
        // As in `collectDeliveriesLocked`: a handler called since the last confirmation may
        // have had its one call after the close already.
        if !called { stale.append((source, token)) }
        continue
      }
      if let index {
        source.registrations[index].calledSinceConfirmed = false
        source.registrations[index].deliverUnchecked = false
      }
      live.append((source.fileDescriptor, mask, token))
    }
    func failed() -> [(DescriptorSource, UInt64)] {
      mode.rebuildFailed = true
      epollRebuildFailures += 1
      return stale
    }
    // The spare only when no new set can be had: a rebuild out of descriptors relies on it.
    guard let fresh = (try? Epoll()) ?? spareEpoll.take() else { return failed() }
    let refused: [UInt64]
    do throws(LoopError) {
      refused = try mode.replaceEpollSet(
        with: fresh, wakeFD: try wakeFDLocked(), registrations: live)
    } catch {
      // The kernel refused the loop's own descriptors in the new set (out of memory, or of
      // epoll watches), which leaves it empty: it goes back in reserve.
      if spareEpoll == nil { spareEpoll = fresh }
      return failed()
    }
    if spareEpoll == nil { spareEpoll = try? Epoll() }
    // Descriptors closed without removing their source can no longer be registered: they
    // are dead, so they stay out of the set like a hung-up one.
    for token in refused {
      guard let source = mode.descriptors[token],
        let index = source.registrations.firstIndex(where: { $0.token == token })
      else { continue }
      source.registrations[index].parked = true
    }
    epollRebuilds += 1
    return stale
  }
}
