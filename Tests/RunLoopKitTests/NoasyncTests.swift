import Testing

/// Checklist line 63: `Loop.run` is `noasync`. A compile-time property, so the test compiles a
/// two-line client against the RunLoopKit module this test binary was built with.
extension RunLoopKitTests {
  @Suite("Running a loop from async code") struct Noasync {
    @Test(
      "63. Calling run on a loop from an async context is a compile-time error with a message saying what to use instead"
    )
    func test_63_runIsNoasync() throws {
      let (status, output) = try typecheckClient(
        """
        import RunLoopKit
        func waitForWork() async { Loop.current.run(for: .seconds(1)) }
        """)
      #expect(status != 0, "the async call compiled: \(output)")
      #expect(
        output.contains("error: instance method 'run' is unavailable from asynchronous contexts"))
      #expect(output.contains("ResidentThread.run"), "the message says what to use instead")
    }
  }
}
