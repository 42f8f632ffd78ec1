import CCurl
import RunLoopKit

/// libcurl's `multi_socket` interface run by a loop: curl says which sockets to watch and when
/// its timer expires, and the loop does the waiting.
///
/// - Socket callback: one `DescriptorSource` per socket, its interest changed in place when
///   curl asks for other events, invalidated on `CURL_POLL_REMOVE` (curl closes the socket
///   after that call, so the source goes while the number is still the socket's).
/// - Timer callback: one `LoopTimer` for the handle's life, parked at `.distantFuture`, its
///   fire date moved ("in 20 ms", "now", "never").
/// - Each source's or the timer's callout calls `curl_multi_socket_action`, then collects the
///   transfers curl has finished.
///
/// Lives on the loop's thread: make it there with the loop's view, call everything there.
final class CurlMulti {
  private let multi: UnsafeMutableRawPointer  // CURLM *
  private let loop: IsolatedLoop
  private let mode: Loop.Mode
  private var sockets: [curl_socket_t: DescriptorSource] = [:]
  private var timer: LoopTimer?
  private var active: [UnsafeMutableRawPointer: Transfer] = [:]  // by CURL *
  /// Called on the loop's thread for each transfer curl has finished, in the order it did.
  var onFinish: ((Transfer) -> Void)?
  /// Socket registrations the loop refused (curl fails those transfers).
  private(set) var problems: [String] = []
  /// CPU time spent inside `curl_multi_socket_action` (curl's work and its reads): the rest of
  /// the thread's time is the loop's.
  private(set) var timeInCurl = Duration.zero

  init(loop: IsolatedLoop, mode: Loop.Mode = .default, maxHostConnections: Int) throws {
    guard let multi = curl_multi_init() else { throw CurlError.multi("curl_multi_init failed") }
    self.multi = multi
    self.loop = loop
    self.mode = mode
    timer = try loop.addTimer(
      label: "curl timer", fireAt: .distantFuture, repeating: .seconds(86_400 * 365), to: mode
    ) { _ in self.act(on: socketTimeout, events: 0) }
    let code = ccurl_multi_setup(
      multi,
      { _, socket, what, user, _ in CurlMulti.from(user).watch(socket, what) },
      { _, milliseconds, user in
        CurlMulti.from(user).moveTimer(milliseconds)
        return 0
      }, Unmanaged.passUnretained(self).toOpaque(), maxHostConnections)
    guard code == CURLM_OK else { throw CurlError.multi("curl_multi_setopt: \(code)") }
  }

  /// Starts `transfer`; it finishes through `onFinish`.
  func add(_ transfer: Transfer) throws {
    guard let easy = curl_easy_init() else { throw CurlError.easy("curl_easy_init failed") }
    let setup = ccurl_easy_get(
      easy, transfer.url, transfer.timeoutMilliseconds,
      { _, size, count, user in
        Transfer.from(user).bytes += size * count
        return size * count
      }, Unmanaged.passUnretained(transfer).toOpaque())
    guard setup == CURLE_OK else {
      curl_easy_cleanup(easy)
      throw CurlError.easy("curl_easy_setopt for \(transfer.url): \(setup)")
    }
    active[easy] = transfer
    curl_multi_add_handle(multi, easy)
  }

  /// Gives everything back: the sources, the timer, curl's handles. Call on the loop's thread.
  func invalidate() {
    timer?.invalidate()
    for source in sockets.values { source.invalidate() }
    sockets = [:]
    for easy in active.keys {
      curl_multi_remove_handle(multi, easy)
      curl_easy_cleanup(easy)
    }
    active = [:]
    onFinish = nil
    curl_multi_cleanup(multi)
  }

  /// curl's socket callback: what to watch on `socket` now.
  private func watch(_ socket: curl_socket_t, _ what: Int32) -> Int32 {
    if what == CURL_POLL_REMOVE {
      sockets.removeValue(forKey: socket)?.invalidate()
      return 0
    }
    var interest: DescriptorSource.Events = []
    if what & CURL_POLL_IN != 0 { interest.insert(.readable) }
    if what & CURL_POLL_OUT != 0 { interest.insert(.writable) }
    do {
      if let source = sockets[socket] {
        // Also un-parks a source that reported a hang-up or an error: curl still wants it.
        if source.interest != interest || source.isParked { try source.setInterest(interest) }
      } else {
        sockets[socket] = try loop.addSource(
          fileDescriptor: socket, label: "curl socket", interest: interest, to: mode
        ) { _, events in
          var flags: Int32 = 0
          if !events.isDisjoint(with: [.readable, .hangUp]) { flags |= CURL_CSELECT_IN }
          if events.contains(.writable) { flags |= CURL_CSELECT_OUT }
          if events.contains(.error) { flags |= CURL_CSELECT_ERR }
          self.act(on: socket, events: flags)
        }
      }
      return 0
    } catch {
      problems.append("socket \(socket): \(error)")
      return -1
    }
  }

  /// curl's timer callback: -1 means no timer, 0 means now.
  private func moveTimer(_ milliseconds: Int) {
    timer?.fireDate =
      milliseconds < 0 ? .distantFuture : LoopClock.now.advanced(by: .milliseconds(milliseconds))
  }

  private func act(on socket: curl_socket_t, events: Int32) {
    var running: Int32 = 0
    let start = threadCPUTime()
    curl_multi_socket_action(multi, socket, events, &running)
    timeInCurl += threadCPUTime() - start
    while let message = curl_multi_info_read(multi, &running) {
      guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
        let transfer = active.removeValue(forKey: easy)
      else { continue }
      transfer.result = ccurl_message_result(message)
      transfer.status = ccurl_easy_status(easy)
      curl_multi_remove_handle(multi, easy)
      curl_easy_cleanup(easy)
      onFinish?(transfer)
    }
  }

  private static func from(_ user: UnsafeMutableRawPointer?) -> CurlMulti {
    Unmanaged<CurlMulti>.fromOpaque(user!).takeUnretainedValue()
  }
}

/// `CURL_SOCKET_TIMEOUT`, a macro Swift does not import: "no socket, the timer expired".
private let socketTimeout: curl_socket_t = -1

enum CurlError: Error {
  case multi(String)
  case easy(String)
}
