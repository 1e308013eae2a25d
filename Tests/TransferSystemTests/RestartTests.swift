import Foundation
import Testing
import TransferCore
@testable import TransferTestSupport

@Suite("Restart")
struct RestartTests {
    @Test("a second server on the same database keeps accounts, pending transfers and the signing key")
    func restart() async throws {
        let database = TempDatabase()
        defer { database.remove() }
        let a = Device(), b = Device()
        let saved = LockedStrings()
        try await Harness(database: database).run { api, _ in
            let session = try await api.login(a)
            saved.add(try #require(session["accountId"] as? String, "\(session.text)"), try session.accessToken)
            #expect(try await api.setUp(token: session.accessToken, email: "restart@example.com", password: "plum-harbor-71-sail").status == .created)
        }
        let (account, token) = (saved.all[0], saved.all[1])
        try await Harness(database: database).run { api, _ in
            // The access token from before the restart is still accepted: same key.
            let me = try await api.me(token)
            #expect(me.status == .ok)
            #expect(me["migrationFlag"] as? Bool == true)
            let claim = try await api.claim(email: "restart@example.com", password: "plum-harbor-71-sail", device: b)
            #expect(claim.status == .ok)
            #expect(claim["accountId"] as? String == account)
        }
    }
}
