import HTTPTypes
import Hummingbird
import TransferArgon2
import TransferCore

/// The HTTP contract: parses and validates requests, calls the service, shapes answers.
/// One route table; each feature's file (`Routes+*.swift`) contributes its rows, beside
/// their handlers and the body types they answer with.
struct API<Context: AppRequestContext>: Sendable {
    let service: TransferService
    let tokenBox: TokenBox
    let configuration: ServerConfiguration
    let metrics: ServiceMetrics
    let hasher: Argon2Hasher?
    let creationLimiter: RateLimiter?
    let claimLimiter: RateLimiter?
    /// nil while Sign in with Apple is off: its routes answer `501 not_configured`.
    let apple: AppleSignIn?
    let openAPI: [UInt8]

    typealias Handler = @Sendable (Request, Context) async throws -> Response
    typealias Row = (method: HTTPRequest.Method, path: String, handler: (API) -> Handler)

    /// Every route, once: what `register` adds to the router, and what answers 405 with `Allow`.
    static var routes: [Row] {
        sessionRoutes + transferRoutes + deviceRoutes + pushRoutes + appleRoutes + handoffRoutes + operationRoutes
    }

    /// The methods of each path.
    static var allowedMethods: [String: [HTTPRequest.Method]] {
        routes.reduce(into: [:]) { $0[$1.path, default: []].append($1.method) }
    }

    func register(on router: Router<Context>) {
        for route in Self.routes {
            router.on(RouterPath(route.path), method: route.method, use: route.handler(self))
        }
    }
}
