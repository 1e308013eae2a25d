import Foundation

/// A transfer code: the old phone shows it (as text and as a QR code), the user types or scans
/// it on the new phone (contract v1.2, "Transfer codes: no email, no password").
///
/// 16 characters of Crockford base32 (80 random bits), shown in four groups of four:
/// `7KQM-2XD4-R9HW-C3NB`. What a user types is read as the service reads it: case-insensitively,
/// ignoring spaces and hyphens, with Crockford's aliases `I` and `L` for `1` and `O` for `0`.
///
/// ```swift
/// guard let code = TransferCode(textField.text ?? "") else { return showTypo() }
/// try await transfer.claimTransfer(code: code)
/// ```
///
/// A code is a credential: ``description``, `debugDescription` and `dump` print `<redacted>`.
/// Show ``grouped`` to the user, and put ``url(base:)`` in a QR code.
public struct TransferCode: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The number of characters of a code (without hyphens).
    public static let length = 16

    /// The code's 16 characters, upper case, without hyphens: what TransferKit sends.
    public let value: String

    /// The code a user typed or pasted; nil when it is not 16 characters of Crockford base32
    /// once spaces and hyphens are left out (`U`, punctuation, too short or too long).
    public init?(_ typed: String) {
        guard let value = CrockfordCode.normalize(typed, length: Self.length) else { return nil }
        self.value = value
    }

    /// The code in four groups of four, as the user sees it: `7KQM-2XD4-R9HW-C3NB`.
    public var grouped: String { CrockfordCode.grouped(value) }

    /// A link that carries the code, for a QR code the app draws: `base` with the code (the
    /// grouped form) in the fragment, `…/transfer#code=7KQM-2XD4-R9HW-C3NB`. `base` is your app's
    /// URL scheme (`yourapp://transfer`) or a universal link (`https://app.example.com/transfer`);
    /// read it back with ``init(url:base:)``.
    ///
    /// The fragment never leaves the device: a new phone without the app opens a universal link
    /// in Safari, and the request then carries no code, so this 24-hour bearer code lands in no
    /// web server, CDN or analytics log (a query would).
    public func url(base: URL) -> URL { CrockfordCode.url(base: base, code: grouped) }

    /// The code in a link made by ``url(base:)``: in the fragment (`#code=…`), or in the query
    /// (`?code=…`, the form TransferKit 2.0 made); nil when the link has no valid `code`, or when
    /// `base` is given and the link's scheme, host or path differ from it.
    public init?(url: URL, base: URL? = nil) {
        guard let text = CrockfordCode.code(in: url, base: base) else { return nil }
        self.init(text)
    }

    public var description: String { "TransferCode(\(Redacted.text))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["value": Redacted.text]) }
}

/// A recovery code: the account's way back onto a new phone when the old one is lost (contract
/// v1.2, "A way back for every account"). Shown once when made
/// (``TransferClient/makeRecoveryCode(of:)``): the user writes it down or keeps it in a password
/// manager, and types it on the new phone (``TransferClient/claim(recoveryCode:existingAccounts:)``).
///
/// 20 characters of Crockford base32 (100 random bits), in five groups of four
/// (`7KQM-2XD4-R9HW-C3NB-5TGA`), read with the same rules as a ``TransferCode``: case-insensitive,
/// spaces and hyphens ignored, `I`/`L` → `1`, `O` → `0`.
///
/// It prints `<redacted>` (``description``, `debugDescription`, `dump`); show ``grouped``.
public struct RecoveryCode: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The number of characters of a code (without hyphens).
    public static let length = 20

    /// The code's 20 characters, upper case, without hyphens: what TransferKit sends.
    public let value: String

    /// The code a user typed or pasted; nil when it is not 20 characters of Crockford base32
    /// once spaces and hyphens are left out.
    public init?(_ typed: String) {
        guard let value = CrockfordCode.normalize(typed, length: Self.length) else { return nil }
        self.value = value
    }

    /// The code in five groups of four, as the user sees it.
    public var grouped: String { CrockfordCode.grouped(value) }

    public var description: String { "RecoveryCode(\(Redacted.text))" }
    public var debugDescription: String { description }
    public var customMirror: Mirror { Mirror(self, children: ["value": Redacted.text]) }
}

/// The reading rules both codes share.
enum CrockfordCode {
    static let alphabet = Set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")

    /// `typed` upper-cased, without spaces and hyphens, with `I`/`L` read as `1` and `O` as `0`;
    /// nil unless that is `length` characters of the alphabet.
    static func normalize(_ typed: String, length: Int) -> String? {
        var result = ""
        // Only ASCII letters change case: "ß" must not become "SS", nor "ı" an "I".
        for original in typed {
            let character = original.isASCII ? Character(original.uppercased()) : original
            switch character {
            case " ", "-", "\u{00A0}", "\t", "\n", "\u{2010}", "\u{2011}", "\u{2012}", "\u{2013}", "\u{2014}", "\u{2212}":
                continue  // spaces and hyphens, as keyboards and copy-paste produce them
            case "I", "L": result.append("1")
            case "O": result.append("0")
            default:
                guard alphabet.contains(character) else { return nil }
                result.append(character)
            }
            if result.count > length { return nil }
        }
        return result.count == length ? result : nil
    }

    /// Groups of four joined by hyphens.
    static func grouped(_ value: String) -> String {
        var groups: [Substring] = []
        var rest = Substring(value)
        while !rest.isEmpty {
            groups.append(rest.prefix(4))
            rest = rest.dropFirst(4)
        }
        return groups.joined(separator: "-")
    }

    static func url(base: URL, code: String) -> URL {
        guard var components = URLComponents(url: base, resolvingAgainstBaseURL: false) else {
            preconditionFailure("TransferKit: invalid base URL \(base)")
        }
        let query = (components.queryItems ?? []).filter { $0.name != "code" }
        components.queryItems = query.isEmpty ? nil : query
        components.fragment = "code=" + code
        guard let url = components.url else { preconditionFailure("TransferKit: cannot build a URL on \(base)") }
        return url
    }

    /// The `code` of `url`'s fragment, else of its query, when `url` matches `base` (scheme and
    /// host case-insensitively, path exactly).
    static func code(in url: URL, base: URL?) -> String? {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return nil }
        if let base, let expected = URLComponents(url: base, resolvingAgainstBaseURL: false) {
            func trimmed(_ path: String) -> String { path.hasSuffix("/") ? String(path.dropLast()) : path }
            guard components.scheme?.lowercased() == expected.scheme?.lowercased(),
                components.host?.lowercased() == expected.host?.lowercased(),
                trimmed(components.path) == trimmed(expected.path)
            else { return nil }
        }
        let inFragment = components.fragment?.split(separator: "&").last { $0.hasPrefix("code=") }?.dropFirst("code=".count)
        return inFragment.map { String($0).removingPercentEncoding ?? String($0) }
            ?? components.queryItems?.last { $0.name == "code" }?.value
    }
}
