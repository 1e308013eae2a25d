import Hummingbird

// Operations: keys, health, readiness, metrics and the OpenAPI document.
extension API {
    static var operationRoutes: [Route] {
        [
            Route(.get, "/.well-known/jwks.json") { $0.jwks },
            Route(.get, "/healthz") { _ in { _, _ in raw(Array(#"{"status":"ok"}"#.utf8), type: "application/json") } },
            Route(.get, "/readyz") { api in { _, _ in try await api.ready() } },
            Route(.get, "/metrics") { api in { _, _ in
                raw(api.metrics.exposition(hasher: api.hasher), type: "text/plain; version=0.0.4; charset=utf-8")
            } },
            Route(.get, "/openapi.yaml") { api in { _, _ in raw(api.openAPI, type: "application/yaml") } },
        ]
    }

    func jwks(_ request: Request, _ context: Context) async throws -> Response {
        Self.raw(try tokenBox.tokens.jwksJSON, type: "application/json", cache: "public, max-age=300")
    }

    func ready() async throws -> Response {
        do {
            try await service.store.ping()
            return Self.raw(Array(#"{"status":"ready"}"#.utf8), type: "application/json")
        } catch {
            throw APIError(.serviceUnavailable, "not_ready", "The database does not answer.", headers: [.retryAfter: "5"])
        }
    }
}
