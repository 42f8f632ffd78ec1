import CRunLoopShims
import Foundation
import Glibc
import Testing

@testable import RunLoopKit

extension RunLoopKitTests {
  @Suite("Descriptor sources (source1)") struct DescriptorSources {
    @Test(
      "25. An eventfd written from another thread wakes the loop; the handler runs on the loop thread; it counts as handled"
    )
    func test_25_eventfdWakesLoop() throws {
      let efd = crl_eventfd_create(0)
      defer { close(efd) }
      let onLoopThread = Box(false)
      let result = Box<Loop.RunResult?>(nil)
      let thread = LoopThread { loop in
        result.value = loop.run(for: .seconds(20), returnAfterSourceHandled: true)
      }
      let loopThread = Box<pthread_t?>(nil)
      try thread.loop.perform { loopThread.value = pthread_self() }
      let source = DescriptorSource(fileDescriptor: efd) { _, events in
        var value: UInt64 = 0
        _ = read(efd, &value, 8)
        onLoopThread.value =
          events.contains(.readable)
          && loopThread.value.map { pthread_equal($0, pthread_self()) != 0 } == true
      }
      try thread.loop.add(source, to: .default)
      thread.start()
      #expect(waitUntil { thread.loop.isWaiting })
      var one: UInt64 = 1
      _ = write(efd, &one, 8)
      thread.join()
      #expect(result.value == .handledSource)
      #expect(onLoopThread.value)
    }

    @Test(
      "26. Readable pipe, writable socket, hang-up on peer close, interest changed while registered"
    )
    func test_26_readableWritableHangUp() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        let pipe = makePipe()
        defer { close(pipe.read) }
        let reader = DescriptorSource(fileDescriptor: pipe.read) { source, events in
          recorder.log("pipe \(events)")
          drain(pipe.read)
          if events.contains(.hangUp) { source.invalidate() }
        }
        try loop.add(reader, to: .default)
        writeByte(pipe.write)
        #expect(loop.run(for: .seconds(5), returnAfterSourceHandled: true) == .handledSource)
        close(pipe.write)
        #expect(loop.run(for: .seconds(5), returnAfterSourceHandled: true) == .handledSource)

        var pair: [Int32] = [0, 0]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0)
        defer { close(pair[0]) }
        let socket = DescriptorSource(fileDescriptor: pair[0], interest: .writable) {
          source, events in
          recorder.log("socket \(events)")
          if events.contains(.hangUp) {
            source.invalidate()
          } else {
            try? source.setInterest(.readable)
          }
        }
        try loop.add(socket, to: .default)
        #expect(loop.run(for: .seconds(5), returnAfterSourceHandled: true) == .handledSource)
        #expect(socket.interest == .readable)
        // Now only readable: nothing to read, so nothing fires.
        #expect(loop.run(for: .milliseconds(50), returnAfterSourceHandled: true) == .timedOut)
        close(pair[1])
        #expect(loop.run(for: .seconds(5), returnAfterSourceHandled: true) == .handledSource)
      }
      #expect(
        recorder.all == [
          "pipe [readable]", "pipe [hangUp]", "socket [writable]",
          "socket [readable, hangUp]",
        ])
    }

    @Test(
      "26b. A hung-up descriptor that stays registered is reported once and does not make the loop spin"
    )
    func test_26b_hangUpIsReportedOnce() throws {
      let pipe = makePipe()
      defer { close(pipe.read) }
      close(pipe.write)
      let (events, passes) = try eventsAndPasses(fileDescriptor: pipe.read, interest: .readable)
      #expect(events == ["[hangUp]"])
      #expect(passes <= 3)
    }

    @Test("26b. A source parked after a hang-up says so (isParked) until setInterest resumes it")
    func test_26b_isParkedAfterHangUp() throws {
      let states = try onLoopThread { loop -> [Bool] in
        let pipe = makePipe()
        defer { close(pipe.read) }
        let source = DescriptorSource(fileDescriptor: pipe.read) { _, _ in }
        var states = [source.isParked]  // in no mode
        try loop.add(source, to: .default)
        defer { source.invalidate() }
        states.append(source.isParked)  // polling
        close(pipe.write)
        loop.run(for: .seconds(10), returnAfterSourceHandled: true)
        states.append(source.isParked)  // told of the hang-up: parked
        try source.setInterest(.readable)
        states.append(source.isParked)  // resumed
        return states
      }
      #expect(states == [false, false, true, false])
    }

    @Test("27. A descriptor source in mode A neither fires nor wakes the loop while it runs mode B")
    func test_27_otherModeDoesNotWake() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        let pipe = makePipe()
        defer {
          close(pipe.read)
          close(pipe.write)
        }
        try loop.add(
          DescriptorSource(fileDescriptor: pipe.read) { _, _ in
            recorder.log("fired in \(loop.currentMode!)")
            drain(pipe.read)
          }, to: "A")
        try loop.add(ManualSource {}, to: "B")
        try loop.add(activityLogger(recorder), to: "B")
        writeByte(pipe.write)
        #expect(loop.run(in: "B", for: .milliseconds(200)) == .timedOut)
        #expect(
          loop.run(in: "A", for: .seconds(5), returnAfterSourceHandled: true) == .handledSource)
      }
      #expect(
        recorder.all == [
          "entry", "beforeTimers", "beforeSources", "beforeWaiting", "afterWaiting", "exit",
          "fired in A",
        ])
    }

    @Test(
      "28. A closed fd, a negative fd or a regular file is refused with the fd and errno; nothing is half-registered"
    )
    func test_28_badDescriptors() throws {
      try onLoopThread { loop in
        // Create the mode (and its epoll fd) and the loop's spare epoll set (made with its
        // first descriptor source) first, so the closed number is not reused by either.
        let keeper = ManualSource {}
        try loop.add(keeper, to: .default)
        try withPipe { live in
          let source = DescriptorSource(fileDescriptor: live.read) { _, _ in }
          try loop.add(source, to: .default)
          source.invalidate()
        }
        // The default mode now exists and holds nothing, so a zero-length run of it finishes
        // at once; a source left half-registered in it would make that run time out instead.
        loop.remove(keeper, from: .default)
        #expect(loop.run(for: .zero) == .finished)
        // After a refused add, the source is in no mode and default holds nothing.
        func leftNothing(_ source: DescriptorSource, _ comment: Comment) {
          #expect(!loop.contains(source, in: .default), comment)
          #expect(!loop.contains(source, in: .common), comment)
          #expect(loop.run(for: .zero) == .finished, comment)
        }

        let pipe = makePipe()
        close(pipe.read)
        close(pipe.write)
        let closed = DescriptorSource(fileDescriptor: pipe.read) { _, _ in }
        #expect(
          throws: LoopError.system(
            SystemError(operation: "epoll_ctl(ADD)", subject: "fd \(pipe.read)", errno: EBADF))
        ) {
          try loop.add(closed, to: .default)
        }
        leftNothing(closed, "a closed fd")

        // The add of `fd` is refused by epoll_ctl with `errno`, and the message names both.
        func expectRefused(
          _ fd: Int32, errno code: Int32, named name: String, kind: String? = nil,
          _ comment: Comment
        ) -> String {
          let source = DescriptorSource(fileDescriptor: fd) { _, _ in }
          defer { leftNothing(source, comment) }
          do throws(LoopError) {
            try loop.add(source, to: .default)
            Issue.record("\(comment) was accepted")
            return ""
          } catch {
            #expect(
              error
                == .system(
                  SystemError(
                    operation: "epoll_ctl(ADD)", subject: "fd \(fd)", errno: code, fileKind: kind)),
              comment)
            #expect(error.description.contains("fd \(fd)"), comment)
            #expect(error.description.contains(name), comment)
            return error.description
          }
        }

        _ = expectRefused(-1, errno: EBADF, named: "EBADF", "fd -1")

        let file = open("/proc/self/status", O_RDONLY)
        defer { close(file) }
        let regular = expectRefused(
          file, errno: EPERM, named: "EPERM", kind: "a regular file", "a regular file")
        #expect(regular.contains("fd \(file) is a regular file, which does not support epoll"))
        #expect(regular.contains("read them directly"))

        // A character device without poll support: the message names its type, and says
        // nothing about regular files.
        let null = open("/dev/null", O_RDONLY)
        defer { close(null) }
        let device = expectRefused(
          null, errno: EPERM, named: "EPERM", kind: "a character device", "/dev/null")
        #expect(device.contains("fd \(null) is a character device, which does not support epoll"))
        #expect(!device.contains("regular"))

        // All or nothing across the common modes: X already holds this fd, so joining X
        // fails after default succeeded, and default must be left again.
        let live = makePipe()
        defer {
          close(live.read)
          close(live.write)
        }
        try loop.addCommonMode("X")
        try loop.add(DescriptorSource(fileDescriptor: live.read) { _, _ in }, to: "X")
        let twice = DescriptorSource(fileDescriptor: live.read) { _, _ in }
        #expect(throws: LoopError.self) { try loop.add(twice, to: .common) }
        leftNothing(twice, "an fd X already watches, added to .common")
        // default's epoll set does not hold the fd, so another source can register it there.
        try loop.add(DescriptorSource(fileDescriptor: live.read) { _, _ in }, to: .default)
      }
    }

    @Test(
      "29. After an fd is closed and its number reused, the old source never gets the new file's events"
    )
    func test_29_fdReuse() throws {
      let recorder = Recorder()
      try onLoopThread { loop in
        let first = makePipe()
        let old = DescriptorSource(fileDescriptor: first.read) { _, events in
          recorder.log("old \(events)")
        }
        try loop.add(old, to: .default)
        close(first.read)
        close(first.write)
        let second = makePipe()
        // Make sure the number really is reused.
        if second.read != first.read {
          #expect(dup2(second.read, first.read) == first.read)
          close(second.read)
        }
        let reusedFD = first.read
        defer {
          close(reusedFD)
          close(second.write)
        }
        let new = DescriptorSource(fileDescriptor: reusedFD) { _, _ in
          recorder.log("new")
          drain(reusedFD)
        }
        try loop.add(new, to: .default)
        writeByte(second.write)
        loop.run(for: .milliseconds(100))
        // Removing the old source must not unregister the new one that now owns the number.
        loop.remove(old, from: .default)
        writeByte(second.write)
        loop.run(for: .milliseconds(100))
      }
      #expect(recorder.all == ["new", "new"])
    }
  }
}
