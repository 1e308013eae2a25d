import Foundation
import Testing
import TransferArgon2
@testable import TransferTestSupport

@Suite("Hash pool")
struct OverloadTests {
    @Test("claims beyond workers + queue get 503 overloaded at once; logins still answer; hashes never exceed workers")
    func overload() async throws {
        var harness = Harness {
            $0.hashWorkers = 1
            $0.hashQueue = 1
            $0.argon2 = Argon2Parameters(memoryKiB: 32768, iterations: 3, parallelism: 1)
        }
        harness.injectHasher = false
        defer { harness.database.remove() }
        try await harness.run { api, parts in
            let session = try await api.login(Device())
            #expect(try await api.setUp(token: session.accessToken, email: "busy@example.com", password: "plum-harbor-71-sail").status == .created)
            let results = try await withThrowingTaskGroup(of: (Int, String?, String?).self) { group in
                for _ in 0..<12 {
                    group.addTask {
                        let r = try await api.claim(email: "busy@example.com", password: "wrong-guess-1", device: Device())
                        return (Int(r.status.code), r.error, r.headers[.retryAfter])
                    }
                }
                // A login while the pool is saturated still answers.
                group.addTask {
                    let r = try await api.login(Device())
                    return (Int(r.status.code), "login", nil)
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(results.contains { $0.0 == 201 && $0.1 == "login" })
            let overloaded = results.filter { $0.1 == "overloaded" }
            #expect(!overloaded.isEmpty)
            #expect(overloaded.allSatisfy { $0.0 == 503 && $0.2 != nil })
            #expect(parts.hasher.peakConcurrentHashes == 1)
            #expect(parts.hasher.memoryBoundKiB == 32768)
            // Every claim got a contract answer: counted, refused as overloaded, or locked.
            #expect(results.allSatisfy { ["login", "overloaded", "invalid_transfer_credentials", "too_many_attempts"].contains($0.1) })
        }
    }
}
