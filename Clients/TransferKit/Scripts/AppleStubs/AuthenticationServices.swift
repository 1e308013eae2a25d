// A stand-in for Apple's AuthenticationServices framework with the members TransferKit reads (see Security.swift).
import Foundation

@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
open class ASAuthorizationAppleIDCredential: NSObject, @unchecked Sendable {
    open var user: String { "" }
    open var identityToken: Data? { nil }
    open var authorizationCode: Data? { nil }
}
