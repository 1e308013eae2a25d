import Foundation
import Testing

@Suite("Two nodes on one PostgreSQL database", .serialized)
struct TwoNodeTests {
    static func body(_ d: Device) -> String { #"{"deviceId":"\#(d.id)","deviceSecret":"\#(d.secret)"}"# }
    static func claim(_ email: String, _ password: String, _ d: Device) -> String {
        #"{"email":"\#(email)","temporaryPassword":"\#(password)","deviceId":"\#(d.id)","deviceSecret":"\#(d.secret)"}"#
    }

    @Test("set up on node 1, claim on node 2; 16 claims over both nodes: one winner; A refused on both",
          .enabled(if: StoreKind.available.contains(.postgres)))
    func twoNodes() async throws {
        try await TestPostgres.withDatabase { url in
            let one = try Node(database: url)
            let two = try Node(database: url)
            defer { one.stop(); two.stop() }
            #expect(try await one.waitReady())
            #expect(try await two.waitReady())

            // A token issued by node 1 is accepted by node 2: one signing key in the database.
            let a = Device()
            let (created, session) = try one.post("/v1/devices/login", Self.body(a))
            #expect(created == 201)
            let token = try #require(session["accessToken"] as? String, "login on node 1: \(created) \(session)")
            #expect(try two.get("/v1/me", token: token) == 200)

            #expect(try one.put("/v1/me/transfer", #"{"email":"nodes@example.com","temporaryPassword":"plum-harbor-71-sail"}"#, token: token) == 201)
            let b = Device()
            let (claimed, claim) = try two.post("/v1/transfers/claim", Self.claim("nodes@example.com", "plum-harbor-71-sail", b))
            #expect(claimed == 200)
            #expect(claim["accountId"] as? String == session["accountId"] as? String)
            #expect(try one.post("/v1/devices/login", Self.body(a)).0 == 410)
            #expect(try two.post("/v1/devices/login", Self.body(a)).0 == 410)
            #expect(try one.get("/v1/me", token: token) == 401)
            #expect(try one.post("/v1/devices/login", Self.body(b)).1["accountId"] as? String == session["accountId"] as? String)

            // Sixteen claims of one transfer, spread over both nodes, at once.
            let c = Device()
            let (createdC, sessionC) = try one.post("/v1/devices/login", Self.body(c))
            let tokenC = try #require(sessionC["accessToken"] as? String, "login of C on node 1: \(createdC) \(sessionC)")
            #expect(try two.put("/v1/me/transfer", #"{"email":"race@example.com","temporaryPassword":"plum-harbor-71-sail"}"#, token: tokenC) == 201)
            let claimants = (0..<16).map { _ in Device() }
            let running = try claimants.enumerated().map { i, d in
                try (i % 2 == 0 ? one : two).startPost("/v1/transfers/claim", Self.claim("race@example.com", "plum-harbor-71-sail", d))
            }
            var statuses: [String] = []
            for p in running {
                let out = (p.standardOutput as! Pipe).fileHandleForReading.readDataToEndOfFile()
                p.waitUntilExit()
                statuses.append(String(decoding: out, as: UTF8.self))
            }
            #expect(statuses.filter { $0 == "200" }.count == 1, "\(statuses)")
            #expect(statuses.filter { $0 == "401" }.count == 15, "\(statuses)")
            #expect(try one.post("/v1/devices/login", Self.body(c)).0 == 410)
            #expect(try two.post("/v1/devices/login", Self.body(c)).0 == 410)

            // Several accounts on one phone, across nodes: add on node 1, pick and log in on node 2.
            let phone = Device()
            let (_, first) = try one.post("/v1/devices/login", Self.body(phone))
            let added = #"{"deviceId":"\#(phone.id)","deviceSecret":"\#(phone.secret)","newAccount":true}"#
            let (addedStatus, second) = try two.post("/v1/devices/login", added)
            #expect(addedStatus == 201)
            let firstID = try #require(first["accountId"] as? String), secondID = try #require(second["accountId"] as? String)
            let (_, current) = try one.post("/v1/devices/login", Self.body(phone))
            #expect(current["accountId"] as? String == secondID, "the account added on node 2 is current on node 1")
            let (byID, picked) = try two.post("/v1/devices/login", #"{"deviceId":"\#(phone.id)","deviceSecret":"\#(phone.secret)","accountId":"\#(firstID)"}"#)
            #expect(byID == 200)
            #expect(picked["accountId"] as? String == firstID)
            #expect((picked["accounts"] as? [[String: Any]])?.count == 2)
        }
    }
}
