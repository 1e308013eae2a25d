import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
@_spi(TransferKitTesting) import TransferKit
import TransferKitTesting
@testable import TransferTestSupport

/// The same scenarios against `FakeTransferService` (what apps' unit tests and previews use) and
/// against a real `transfer-server` on each store: the outcomes must be the same, so that a test
/// that passes against the fake says something about the service.
@Suite("TransferKit's fake service answers as the real server does")
struct SDKFakeParityTests {
    /// Where a scenario's phones and raw requests go.
    struct Service: Sendable {
        let phone: @Sendable (_ name: String) -> SimulatedPhone
        let send: @Sendable (_ request: URLRequest) async throws -> (Data, HTTPURLResponse)
        let base: URL
    }

    /// A request of `method` to `path` with a JSON body.
    func request(_ service: Service, _ method: String, _ path: String, _ body: [String: Any]) throws -> URLRequest {
        var request = URLRequest(url: service.base.appendingPathComponent(path))
        request.httpMethod = method
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONSerialization.data(withJSONObject: body)
        return request
    }

    /// The refresh token the phone keeps for `account`.
    func storedRefreshToken(_ phone: SimulatedPhone, _ account: String) throws -> String {
        let item = try #require(phone.keychain.items["transferkit.session." + account])
        let object = try #require(try JSONSerialization.jsonObject(with: item) as? [String: Any])
        return try #require(object["refreshToken"] as? String)
    }

    func outcome<T>(_ body: () async throws -> T) async -> String {
        do {
            _ = try await body()
            return "ok"
        } catch let error as TransferError {
            return "error \(error.code)"
        } catch {
            return "error \(type(of: error))"
        }
    }

    /// A transfer by code, its repeats, a rotated refresh token presented again, and a claim
    /// back onto the retired device: each step's outcome, in words without ids.
    func scenario(_ service: Service) async throws -> [String] {
        var steps: [String] = []
        let a = service.phone("A")
        guard case .signedIn(let account, let created) = try await a.launch() else { return ["A did not sign in"] }
        steps.append("A first launch: signedIn created=\(created)")
        let code = try await a.setUpTransferCode().code
        let b = service.phone("B")
        let claimed = try await b.claim(code: code)
        steps.append("B claims: \(claimed.id == account ? "A's account" : "another account")")
        steps.append("B claims again: " + (await outcome { try await b.claim(code: code) }))
        steps.append("C claims the used code: " + (await outcome { try await service.phone("C").claim(code: code) }))
        let aAgain = a.relaunched()
        steps.append("A relaunches: " + (await outcome { try await aAgain.launch() }) + ", accountMoved \(aAgain.saw(.accountMoved))")

        let rotated = try storedRefreshToken(b, account)
        var statuses: [Int] = []
        var next = rotated
        for token in [rotated, rotated] {
            let (data, response) = try await service.send(try request(service, "POST", "v1/tokens/refresh", ["refreshToken": token]))
            statuses.append(response.statusCode)
            if response.statusCode == 200, let body = try JSONSerialization.jsonObject(with: data) as? [String: Any] {
                next = body["refreshToken"] as? String ?? next
            }
        }
        let (_, afterReuse) = try await service.send(try request(service, "POST", "v1/tokens/refresh", ["refreshToken": next]))
        steps.append("refresh, the rotated token again, the new one: \(statuses + [afterReuse.statusCode])")

        let back = try await b.setUpTransferCode().code
        let aFresh = a.relaunched()  // a new process on A's stores claims before any launch
        let claimedBack = await outcome { try await aFresh.claim(code: back) }
        steps.append("A claims it back before launching: \(claimedBack), startedOver \(aFresh.saw(.startedOver))")
        return steps
    }

    @Test("a code transfer, its repeats, refresh-token reuse and a retired device: the fake and the server agree",
          arguments: StoreKind.available)
    func sameOutcomes(kind: StoreKind) async throws {
        let fake = FakeTransferService()
        let fakeService = Service(
            phone: { name in
                let network = LossyNetwork()
                return SimulatedPhone(name, network: network) { keychain, appFiles in
                    fake.client(keychain: keychain, appFiles: appFiles, network: network)
                }
            },
            send: { try await fake.transport.answer($0) },
            base: FakeTransferService.baseURL)
        let expected = try await scenario(fakeService)

        try await kind.withDatabaseLocation { location, _ in
            let node = try Node(database: location.argument)
            defer { node.stop() }
            try #require(try await node.waitReady())
            let base = try #require(URL(string: node.base))
            let server = Service(
                phone: { SimulatedPhone($0, baseURL: base) },
                send: { request in
                    let (data, response) = try await URLSession.shared.data(for: request)
                    return (data, response as! HTTPURLResponse)
                },
                base: base)
            let actual = try await scenario(server)
            #expect(actual == expected, "the fake (first) and the \(kind) server (second) differ")
        }
    }
}

extension SDKFakeParityTests {
    /// A phone signed in to the Apple account whose iCloud Keychain is the given store.
    typealias SyncedPhone = @Sendable (_ name: String, _ iCloudKeychain: MemorySynchronizedStore) -> SimulatedPhone

    /// A phone lost with nothing set up but a backup key: each step's outcome, in words without ids.
    func backupScenario(_ phone: SyncedPhone) async throws -> [String] {
        var steps: [String] = []
        let iCloud = MemorySynchronizedStore()
        let a = phone("A", iCloud)
        guard case .signedIn(let account, _) = try await a.launch() else { return ["A did not sign in"] }
        try await a.setDisplayName("Mia")
        steps.append("A's ways back: \(try await a.profile().waysBack?.map(\.rawValue).sorted() ?? [])")
        let b = phone("B", iCloud)
        guard case .backupsFound(let found) = await b.startingPoint(), let backup = found.first else {
            return steps + ["B found no backup"]
        }
        steps.append("B finds: \(found.map { "\($0.accountId == account ? "A's account" : "another") as \($0.displayName ?? "-")" })")
        let claimed = await outcome { try await b.claim(backup: backup) }
        steps.append("B claims it: \(claimed), current is A's account \(b.currentAccountId == account)")
        steps.append("B's ways back: \(try await b.profile().waysBack?.map(\.rawValue).sorted() ?? [])")
        steps.append("B claims the used key again: " + (await outcome { try await b.claim(backup: backup, choice: .add) }))
        steps.append("C claims the used key: " + (await outcome { try await phone("C", MemorySynchronizedStore()).claim(backup: backup) }))
        let aAgain = a.relaunched()
        steps.append("A relaunches: " + (await outcome { try await aAgain.launch() }) + ", accountMoved \(aAgain.saw(.accountMoved))")
        await b.client.setBackupKeys(enabled: false)
        steps.append("B turns backups off: ways back \(try await b.profile().waysBack?.map(\.rawValue).sorted() ?? []), items \(iCloud.items.count)")
        return steps
    }

    @Test("backup keys: made, found by a second phone, claimed, used up, turned off: the fake and the server agree",
          arguments: StoreKind.available)
    func sameBackupOutcomes(kind: StoreKind) async throws {
        let fake = FakeTransferService()
        let expected = try await backupScenario { name, iCloud in
            let network = LossyNetwork()
            return SimulatedPhone(name, iCloudKeychain: iCloud, network: network) { keychain, appFiles, iCloud in
                fake.client(keychain: keychain, appFiles: appFiles, network: network, iCloudKeychain: iCloud)
            }
        }
        #expect(expected.count == 8, "the fake walks the whole scenario: \(expected)")

        try await kind.withDatabaseLocation { location, _ in
            let node = try Node(database: location.argument)
            defer { node.stop() }
            try #require(try await node.waitReady())
            let base = try #require(URL(string: node.base))
            let actual = try await backupScenario { SimulatedPhone($0, baseURL: base, iCloudKeychain: $1) }
            #expect(actual == expected, "the fake (first) and the \(kind) server (second) differ")
        }
    }
}
