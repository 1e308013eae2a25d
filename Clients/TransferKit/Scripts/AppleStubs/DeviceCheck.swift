// A stand-in for Apple's DeviceCheck framework with the signatures TransferKit calls (see Security.swift).
import Foundation

@available(iOS 14.0, macOS 11.0, tvOS 15.0, watchOS 9.0, *)
public final class DCAppAttestService: @unchecked Sendable {
    public static let shared = DCAppAttestService()
    public var isSupported: Bool { false }
    public func generateKey() async throws -> String { "" }
    public func attestKey(_ keyId: String, clientDataHash: Data) async throws -> Data { Data() }
}

public struct DCError: Error, Sendable {
    public enum Code: Int, Sendable {
        case unknownSystemFailure = 0, featureUnsupported, invalidInput, invalidKey, serverUnavailable
    }
    public var code: Code
}
