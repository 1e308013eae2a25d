import Foundation
import Testing

/// The parts of a JWT, decoded without verifying it: what a test reads of a token it was given.
enum TokenText {
    static func parts(_ token: String) throws -> (header: [String: Any], payload: [String: Any]) {
        func decode(_ s: Substring) throws -> [String: Any] {
            var t = s.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            while t.count % 4 != 0 { t += "=" }
            guard let data = Data(base64Encoded: t), let object = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] else {
                throw TestFailure("the part \"\(s)\" of the token \(token) is not a base64url JSON object")
            }
            return object
        }
        let p = token.split(separator: ".", omittingEmptySubsequences: false)
        guard p.count == 3 else { throw TestFailure("the token \(token) has \(p.count) parts, not 3") }
        return (try decode(p[0]), try decode(p[1]))
    }

    static func kid(_ token: String) throws -> String {
        let header = try parts(token).header
        return try #require(header["kid"] as? String, "a kid in the header \(header) of \(token)")
    }

    static func claims(_ token: String) throws -> [String: Any] { try parts(token).payload }
}
