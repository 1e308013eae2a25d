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
    /// nil while Sign in with Apple is off: its routes answer `501 not_configured`.
    let apple: AppleSignIn?
    /// `openapi.yaml`, in one buffer every answer shares (104 KiB: no copy per request).
    let openAPI: ByteBuffer

    typealias Handler = @Sendable (Request, Context) async throws -> Response

    /// One row of the route table.
    struct Route {
        let method: HTTPRequest.Method
        let path: String
        /// Who may call it: checked by `Authenticator` before the handler runs, which reads
        /// the caller from `context.caller`.
        let access: Access
        /// Makes the handler. Throws `501 not_configured` while the route's feature is off
        /// (`withApple()`, `withHandoff()`): every request then gets that answer, before its
        /// credentials or body are looked at.
        let handler: (API) throws -> Handler

        init(_ method: HTTPRequest.Method, _ path: String, _ access: Access = .anyone, _ handler: @escaping (API) throws -> Handler) {
            self.method = method
            self.path = path
            self.access = access
            self.handler = handler
        }
    }

    /// Every route, once: what `register` adds to the router, and what answers 405 with `Allow`.
    static var routes: [Route] {
        sessionRoutes + transferRoutes + deviceRoutes + pushRoutes + protectionRoutes + appleRoutes + attestationRoutes + handoffRoutes
            + operationRoutes
    }

    /// The methods of each path.
    static var allowedMethods: [String: [HTTPRequest.Method]] {
        routes.reduce(into: [:]) { $0[$1.path, default: []].append($1.method) }
    }

    func register(on router: Router<Context>) {
        for route in Self.routes {
            let path = RouterPath(route.path)
            let handler: Handler
            do {
                handler = try route.handler(self)
            } catch {
                router.on(path, method: route.method) { _, _ -> Response in throw error }
                continue
            }
            let group = router.group()
            if route.access != .anyone {
                group.add(middleware: Authenticator(access: route.access, service: service, tokenBox: tokenBox))
            }
            group.on(path, method: route.method, use: handler)
        }
    }
}
