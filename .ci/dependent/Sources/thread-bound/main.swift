// Thread-bound state as a user writes it from the README, with no escape hatch from Sendable
// checking anywhere in this target (.ci/dependent-check greps for the two spellings).
print(try await SearchOverResults.run())
print(try NetworkThread.run())
