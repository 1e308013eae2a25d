import Foundation
import Testing
import TransferCore
import TransferHTTP
@testable import TransferTestSupport

/// Sign in with Apple through the `transfer-server` binary and its flags, against the fake Apple.
extension ProcessTests {
    @Test("through the real server binary and its flags: link with a code, unlink; the token is revoked and never in the server's log",
          arguments: StoreKind.available)
    func realServer(kind: StoreKind) async throws {
        try await FakeApple.run { apple in
            try await kind.withDatabaseLocation { location, _ in
                let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("siwa-\(UUID().uuidString).p8")
                try apple.teamKey.pemRepresentation.write(to: keyFile, atomically: true, encoding: .utf8)
                defer { try? FileManager.default.removeItem(at: keyFile) }
                let node = try Node(database: location.argument, extra: [
                    "--apple-client-ids", "\(FakeApple.bundleID),\(FakeApple.servicesID)", "--apple-jwks-url", apple.jwksURL,
                    "--apple-team-id", FakeApple.teamID, "--apple-key-id", FakeApple.keyID, "--apple-private-key", keyFile.path,
                    "--apple-token-url", apple.baseURL + "/auth/token", "--apple-revoke-url", apple.baseURL + "/auth/revoke",
                ])
                defer { node.stop() }
                #expect(try await node.waitReady())
                let (_, session) = try node.post("/v1/devices/login", TwoNodeTests.body(Device()))
                let access = try #require(session["accessToken"] as? String, "\(session)")
                let (_, issued) = try node.post("/v1/apple/nonce", "{}")
                let nonce = try #require(issued["nonce"] as? String, "\(issued)")
                let sub = "001234.binary.0101"
                let body = try JSONSerialization.data(withJSONObject: [
                    "identityToken": try apple.token(apple.claims(sub: sub, nonce: nonce, now: Timestamp(Date()))), "nonce": nonce,
                    "authorizationCode": apple.authorizationCode(sub: sub),
                ])
                let bearer = Node.auth(access)
                let linked = try await Curl.callOffPool(
                    ["-X", "PUT", "-H", "Content-Type: application/json"] + bearer + ["-d", String(decoding: body, as: UTF8.self), "\(node.base)/v1/me/apple"])
                #expect(linked.status == 201, "\(linked.body)")
                let token = try #require(apple.refreshTokens(for: sub).first, "the server exchanged the code")
                #expect(try await Curl.callOffPool(["-X", "DELETE"] + bearer + ["\(node.base)/v1/me/apple"]).status == 204)
                #expect(try await apple.eventuallyRevoked(token), "unlink revokes at Apple")
                #expect(!(try node.log()).contains(token))
            }
        }
    }
}
