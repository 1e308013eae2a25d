import Foundation
import Testing
@_spi(TransferKitTesting) @testable import TransferKit

@Suite("Sessions")
struct SessionTests {
    @Test("50 concurrent withAccessToken calls around an expiry make exactly one refresh")
    func singleFlightRefresh() async throws {
        let phone = try await Launched()
        phone.server.refreshDelayNanoseconds = 50_000_000
        let original = try #require(phone.storedSessions[phone.accountId]).accessToken
        let client = phone.client

        let (before, after) = try await withThrowingTaskGroup(of: (Bool, String).self) { group in
            for _ in 0..<25 { group.addTask { (false, try await client.withAccessToken { $0 }) } }
            // expiresIn is 900 s; renewal is due 60 s before expiry.
            phone.clock.advance(by: 850)
            for _ in 0..<25 { group.addTask { (true, try await client.withAccessToken { $0 }) } }
            var before: [String] = [], after: [String] = []
            for try await (late, token) in group {
                if late { after.append(token) } else { before.append(token) }
            }
            return (before, after)
        }

        #expect(phone.server.count("POST /v1/tokens/refresh") == 1)
        let renewed = try #require(phone.storedSessions[phone.accountId]).accessToken
        #expect(renewed != original)
        #expect(Set(after) == [renewed])
        #expect(Set(before).isSubset(of: [original, renewed]))
        #expect(phone.events.all.filter { $0 == .tokenRefreshed(accountId: phone.accountId) }.count == 1)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("a sign-out during an in-flight refresh leaves no tokens behind")
    func signOutDuringRefresh() async throws {
        let phone = try await Launched()
        let gate = Gate()
        phone.server.refreshGate = gate
        phone.clock.advance(by: 890)
        let client = phone.client

        let waiting = Task { try await client.withAccessToken { $0 } }
        try await gate.waitForArrival()  // the refresh is at the server
        try await client.signOut()
        #expect(phone.storedSessions.isEmpty)
        gate.open()  // the refresh answers after the sign-out

        await #expect { try await waiting.value } throws: { TransferError.kind(of: $0) == .signedOut }
        #expect(phone.storedSessions.isEmpty)
        #expect(phone.storedSessions.isEmpty)
        #expect(await client.sessions.isEmpty)
        #expect(phone.server.count("POST /v1/logout") == 1)
        #expect(phone.events.all.contains(.signedOut(accountId: phone.accountId)))
        #expect(!phone.events.all.contains(.tokenRefreshed(accountId: phone.accountId)))
        #expect(phone.server.violations.isEmpty)
    }

    @Test("a caller cancelled while it shares a renewal throws CancellationError at once; the renewal goes on for the others")
    func cancelledCallerStopsWaiting() async throws {
        let phone = try await Launched()
        let gate = phone.holdNextRefresh()
        let client = phone.client

        let cancelled = Task { try await client.withAccessToken { $0 } }
        try await gate.waitForArrival()  // the renewal is at the server, and stays there
        let other = Task { try await client.accessToken() }  // joins the same renewal
        let watchdog = Task { try await Task.sleep(nanoseconds: 3_000_000_000); gate.open() }  // the slow network answers at last
        defer { watchdog.cancel() }
        cancelled.cancel()
        let started = Date()
        let outcome = await cancelled.result
        #expect(throws: CancellationError.self, "the cancelled caller should throw CancellationError, not wait for the renewal") {
            try outcome.get()
        }
        #expect(Date().timeIntervalSince(started) < 2, "the cancelled caller waited for the renewal")

        gate.open()
        let token = try await other.value
        #expect(token == phone.storedSessions[phone.accountId]?.accessToken)
        #expect(phone.server.count("POST /v1/tokens/refresh") == 1)
        #expect(try await Task { try await client.accessToken() }.value == token)  // kept: no new renewal
        #expect(phone.server.count("POST /v1/tokens/refresh") == 1)
    }

    @Test("a sibling session's caller cancelled while it shares a renewal throws CancellationError at once")
    func cancelledBeforeWaiting() async throws {
        let handoff = try await SiblingOnPhone()
        let gate = handoff.phone.holdNextRefresh()
        let sibling = handoff.sibling
        let cancelled = Task { try await sibling.accessToken() }
        try await gate.waitForArrival()
        let other = Task { try await sibling.accessToken() }
        let watchdog = Task { try await Task.sleep(nanoseconds: 3_000_000_000); gate.open() }
        defer { watchdog.cancel() }
        cancelled.cancel()
        let started = Date()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(Date().timeIntervalSince(started) < 2, "the cancelled caller waited for the renewal")
        gate.open()
        #expect(try await other.value == handoff.stored?.tokens.accessToken)
    }

    @Test("a sign-out with an expired access token renews it to end the session at the service")
    func signOutExpiredToken() async throws {
        let phone = try await Launched()
        let stored = try #require(phone.storedSessions[phone.accountId])
        phone.server.expireAccessTokens()
        phone.clock.advance(by: 1000)

        try await phone.client.signOut()
        let logouts = phone.server.requests("POST /v1/logout")
        #expect(logouts.count == 2)
        #expect(logouts[0].bearer == stored.accessToken && logouts[1].bearer != stored.accessToken)
        #expect(phone.server.requests("POST /v1/tokens/refresh").map { $0.body["refreshToken"] as? String } == [stored.refreshToken])
        #expect(!phone.server.hasOpenSession(phone.accountId))
        #expect(phone.storedSessions.isEmpty && phone.storedSessions.isEmpty)
        #expect(phone.events.all.last == .signedOut(accountId: phone.accountId))
        #expect(!phone.events.all.contains(.tokenRefreshed(accountId: phone.accountId)))  // renewed for the logout only
        #expect(phone.server.count("POST /v1/devices/login") == 1)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("a sign-out forgets the tokens also when the service refuses the renewal or fails")
    func signOutForgetsInEveryCase() async throws {
        let phone = try await Launched()
        phone.server.scriptError("POST /v1/logout", status: 401, "invalid_token")
        phone.server.scriptError("POST /v1/tokens/refresh", status: 401, "invalid_refresh_token")
        try await phone.client.signOut()
        #expect(phone.server.count("POST /v1/logout") == 1)  // the session had already ended
        #expect(phone.server.count("POST /v1/tokens/refresh") == 1)
        #expect(phone.storedSessions.isEmpty)

        _ = try await phone.client.withAccessToken { $0 }  // logs in again
        phone.server.scriptError("POST /v1/logout", status: 500, "internal_error")
        try await phone.client.signOut()
        #expect(phone.server.count("POST /v1/logout") == 2)
        #expect(phone.storedSessions.isEmpty)
        #expect(await phone.client.sessions.isEmpty)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("renewals: one flight per key until it is finished or dropped")
    func renewals() async throws {
        var renewals = Renewals()
        let started = Counter()
        let start = { (_: Int) in
            _ = started.next()
            return Task<String, any Error> { "token" }
        }
        let first = renewals.join("a", start: start)
        #expect(renewals.join("a", start: start).id == first.id && started.value == 1)
        #expect(renewals.join("b", start: start).id != first.id && started.value == 2)
        #expect(renewals.isCurrent(first.id, for: "a") && !renewals.isCurrent(first.id, for: "b"))

        renewals.finished(first.id, for: "a")
        #expect(!renewals.isCurrent(first.id, for: "a"))
        let second = renewals.join("a", start: start)
        renewals.drop("a")
        #expect(!renewals.isCurrent(second.id, for: "a"))
        let third = renewals.join("a", start: start)
        renewals.finished(second.id, for: "a")  // a dropped flight's late finish leaves the new one
        #expect(renewals.isCurrent(third.id, for: "a") && started.value == 4)
        #expect(try await second.task.value == "token")
    }

    @Test("a 401 on a request makes one refresh and one retry")
    func unauthorizedRetriedOnce() async throws {
        let phone = try await Launched()
        phone.server.scriptError("GET /v1/devices/accounts", status: 401, "invalid_token")

        let accounts = try await phone.client.accounts()
        #expect(accounts.map(\.id) == [phone.accountId])
        let calls = phone.server.requests("GET /v1/devices/accounts")
        #expect(calls.count == 2)
        #expect(calls[0].bearer != calls[1].bearer)
        #expect(calls[1].bearer == phone.storedSessions[phone.accountId]?.accessToken)
        #expect(phone.server.count("POST /v1/tokens/refresh") == 1)

        // Refused twice: one refresh, one retry, then the error (no loop).
        phone.server.scriptError("GET /v1/devices/accounts", status: 401, "invalid_token")
        phone.server.scriptError("GET /v1/devices/accounts", status: 401, "invalid_token")
        await #expect { try await phone.client.accounts() } throws: { TransferError.kind(of: $0) == .invalidToken }
        #expect(phone.server.count("GET /v1/devices/accounts") == 4)
        #expect(phone.server.count("POST /v1/tokens/refresh") == 2)
        #expect(phone.server.violations.isEmpty)
    }

    @Test("withAccessToken renews once when the app's backend refuses the token")
    func appBackendRefusesToken() async throws {
        let phone = try await Launched()
        let attempts = Counter()
        let token = try await phone.client.withAccessToken { token in
            if attempts.next() == 1 { throw TransferError.accessTokenRejected }
            return token
        }
        #expect(attempts.value == 2)
        #expect(token == phone.storedSessions[phone.accountId]?.accessToken)
        #expect(phone.server.count("POST /v1/tokens/refresh") == 1)
    }

    @Test("a refused refresh token logs in again with the device secret")
    func refusedRefreshLogsInAgain() async throws {
        let phone = try await Launched()
        let identity = try #require(phone.storedIdentity)
        phone.server.scriptError("POST /v1/tokens/refresh", status: 401, "invalid_refresh_token")
        phone.clock.advance(by: 890)

        let token = try await phone.client.withAccessToken { $0 }
        #expect(token == phone.storedSessions[phone.accountId]?.accessToken)
        let logins = phone.server.requests("POST /v1/devices/login")
        #expect(logins.count == 2)
        #expect(logins[1].body["deviceId"] as? String == identity.deviceId)
        #expect(logins[1].body["deviceSecret"] as? String == identity.deviceSecret)
        #expect(logins[1].body["accountId"] as? String == phone.accountId)
        #expect(logins[1].bodyKeys == ["deviceId", "deviceSecret", "accountId"])
        #expect(phone.server.violations.isEmpty)
    }

    @Test("tokens survive a relaunch in the store, and a relaunch logs in")
    func tokensPersist() async throws {
        let phone = try await Launched()
        let stored = try #require(phone.storedSessions[phone.accountId])
        let relaunched = phone.server.client(keychain: phone.keychain, appFiles: phone.appFiles, clock: phone.clock)
        // Before launch: the stored, unexpired token is used as is.
        #expect(try await relaunched.withAccessToken(of: phone.accountId) { $0 } == stored.accessToken)
        #expect(phone.server.count("POST /v1/tokens/refresh") == 0)
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func next() -> Int {
        lock.lock()
        defer { lock.unlock() }
        count += 1
        return count
    }
    var value: Int {
        lock.lock()
        defer { lock.unlock() }
        return count
    }
}
