import Foundation

/// What ``TransferKitTesting``'s fake service needs to know of the wire: the operations TransferKit
/// calls (``Endpoint/all``), and the hashes the contract uses. Not API for apps.
@_spi(TransferKitTesting)
public enum WireContract {
    /// One operation TransferKit calls.
    public struct Route: Sendable {
        /// `"POST /v1/devices/login"`: the method and the path template.
        public let name: String
        /// The body fields TransferKit may send.
        public let bodyFields: Set<String>
        /// The query parameters TransferKit may send.
        public let queryFields: Set<String>
        /// Whether the request carries a bearer token.
        public let needsToken: Bool
        /// Whether it carries the device's secret in `X-Device-Secret` too.
        public let needsDeviceProof: Bool
    }

    /// The operation a request to `path` (under the base URL) with `method` is, if TransferKit calls it.
    public static func route(method: String, path: String) -> Route? {
        guard let endpoint = Endpoint.all.first(where: { $0.method == method && matches(template: $0.path, path: path) }) else {
            return nil
        }
        return Route(
            name: endpoint.description, bodyFields: Set(endpoint.bodyFields), queryFields: Set(endpoint.queryFields),
            needsToken: endpoint.needsToken, needsDeviceProof: endpoint.needsDeviceProof)
    }

    /// Whether `path` fits the path template (`{name}` matches one segment).
    public static func matches(template: String, path: String) -> Bool {
        let a = template.split(separator: "/"), b = path.split(separator: "/")
        return a.count == b.count && zip(a, b).allSatisfy { $0.hasPrefix("{") || $0 == $1 }
    }

    /// The PKCE `S256` challenge of `verifier`.
    public static func pkceChallenge(for verifier: String) -> String { PKCE.challenge(for: verifier) }
}
