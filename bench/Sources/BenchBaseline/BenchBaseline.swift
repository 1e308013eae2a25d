import Foundation
import Hummingbird

/// The ceiling for any route of ours on this machine: a bare Hummingbird server that
/// answers every POST /v1/devices/login with a fixed JSON body of a session's size.
@main
struct BenchBaseline {
    static func main() async throws {
        let port = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 8090
        let body = ByteBuffer(string: #"{"accountId":"00000000-0000-4000-8000-000000000000","userName":"00000000-0000-4000-8000-000000000000","deviceId":"00000000-0000-4000-8000-000000000000","created":false,"migrationFlag":false,"accessToken":"\#(String(repeating: "x", count: 420))","tokenType":"Bearer","expiresIn":900,"refreshToken":"\#(String(repeating: "y", count: 43))"}"#)
        let router = Router()
        router.post("/v1/devices/login") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: port)))
        try await app.runService()
    }
}
