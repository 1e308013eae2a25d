import Foundation

/// The contract's field rules. Each check returns the normalised value or throws
/// the error the contract names for that field.
public enum FieldRules {
    public static func deviceID(_ text: String) throws(TransferError) -> DeviceID {
        guard let id = DeviceID(text) else { throw .invalidDeviceID }
        return id
    }

    /// 32–128 characters of `[A-Za-z0-9_-]`.
    public static func deviceSecret(_ text: String) throws(TransferError) -> String {
        let utf8 = text.utf8
        guard (32...128).contains(utf8.count), utf8.allSatisfy(isSecretByte) else {
            throw .invalidDeviceSecret
        }
        return text
    }

    /// Trimmed, 3–254 characters, exactly one `@` with text on both sides, no whitespace,
    /// control or format characters. Returns the email as the user typed it (trimmed) and the key
    /// it is compared by (NFC, lower-case).
    public static func email(_ text: String) throws(TransferError) -> Email {
        // What arrives is at most 254 code points too (as JSON Schema counts), spaces included.
        guard text.unicodeScalars.count <= 254 else { throw .invalidEmail("email must be at most 254 characters") }
        let trimmed = String(String.UnicodeScalarView(
            text.unicodeScalars.drop(while: isSpace).reversed().drop(while: isSpace).reversed()))
        let count = trimmed.count
        guard count >= 3 else { throw .invalidEmail("email must be at least 3 characters") }
        guard count <= 254 else { throw .invalidEmail("email must be at most 254 characters") }
        guard !trimmed.unicodeScalars.contains(where: { isSpace($0) || $0.properties.generalCategory == .control }) else {
            throw .invalidEmail("email must not contain whitespace or control characters")
        }
        // Format characters (U+200B zero-width space, U+202E right-to-left override, U+FEFF…)
        // are invisible: they make look-alikes of other emails and turn support's output
        // around. Refused anywhere, a pasted byte-order mark at the start too.
        if let format = text.unicodeScalars.first(where: { $0.properties.generalCategory == .format }) {
            let hex = String(format.value, radix: 16, uppercase: true)
            throw .invalidEmail("email must not contain invisible format characters (U+\(String(repeating: "0", count: max(0, 4 - hex.count)) + hex))")
        }
        let parts = trimmed.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
            throw .invalidEmail("email must have one @ with text on both sides")
        }
        return Email(display: trimmed, key: trimmed.precomposedStringWithCanonicalMapping.lowercased())
    }

    /// NFC-normalised, 8–64 characters, not one repeated character, not the email,
    /// not a common password. Returns the normalised password that is hashed.
    public static func temporaryPassword(_ text: String, email: Email) throws(TransferError) -> String {
        let password = text.precomposedStringWithCanonicalMapping
        guard password.utf8.count <= maxPasswordBytes else { throw .weakPassword("temporaryPassword must be at most 64 characters") }
        let count = password.count
        guard count >= 8 else { throw .weakPassword("temporaryPassword must be at least 8 characters") }
        guard count <= 64 else { throw .weakPassword("temporaryPassword must be at most 64 characters") }
        if let first = password.first, password.allSatisfy({ $0 == first }) {
            throw .weakPassword("temporaryPassword must not be one repeated character")
        }
        let folded = password.lowercased()
        guard folded != email.key else { throw .weakPassword("temporaryPassword must not be the email") }
        guard !CommonPasswords.contains(folded) else {
            throw .weakPassword("temporaryPassword is too common; choose another")
        }
        return password
    }

    /// A claim's temporaryPassword, as it is verified: NFC, like the password that was hashed.
    /// Longer input than any set-up accepts is refused before hashing, as a wrong password.
    public static func claimPassword(_ text: String) throws(TransferError) -> String {
        guard text.utf8.count <= maxPasswordBytes else { throw .invalidTransferCredentials }
        return text.precomposedStringWithCanonicalMapping
    }

    /// 64 characters of the widest kind stay far below this; it stops huge input before hashing.
    static let maxPasswordBytes = 1024

    /// Unicode White_Space, and the byte-order mark (which JSON Schema's `\s` also counts).
    private static func isSpace(_ s: Unicode.Scalar) -> Bool { s.properties.isWhitespace || s == "\u{FEFF}" }

    private static func isSecretByte(_ c: UInt8) -> Bool {
        (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 45 || c == 95
    }
}

public struct Email: Hashable, Sendable {
    /// As the user typed it, trimmed; shown back to the user and to support.
    public let display: String
    /// What emails are compared by: NFC, lower-case.
    public let key: String

    public init(display: String, key: String) {
        self.display = display
        self.key = key
    }
}

/// The list of common passwords shipped with the service: `Resources/common-passwords.txt`,
/// compiled into the binary (SwiftPM's `embedInCode`).
public enum CommonPasswords {
    static var text: [UInt8] { PackageResources.common_passwords_txt }

    static let all: Set<String> = Set(
        String(decoding: text, as: UTF8.self).split(whereSeparator: \.isNewline)
            .map { $0.precomposedStringWithCanonicalMapping.lowercased() })

    public static var count: Int { all.count }

    /// `password` must already be NFC and lower-case.
    public static func contains(_ password: String) -> Bool { all.contains(password) }
}
