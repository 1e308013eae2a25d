/// A one-time code a person reads from one phone and types (or scans) on another: Crockford
/// base32, grouped by four (`7KQM-2XD4-R9HW-C3NB`). Transfer codes are 16 characters (80
/// random bits), recovery codes 20 (100 bits). Only the SHA-256 of the canonical form is
/// stored: a code is found by its hash, as a refresh token is, with no slow hash: its
/// entropy, with `--claim-limit` per client, is what makes guessing hopeless (SECURITY.md).
public struct OneTimeCode: Sendable, Hashable, CustomStringConvertible {
    /// Crockford's alphabet: no I, L, O or U.
    public static let alphabet = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ")

    /// The canonical characters, upper case, without separators.
    public let canonical: String

    /// `characters` random characters (5 bits each) from the system CSPRNG.
    public static func make(characters: Int) -> OneTimeCode {
        let bytes = RandomToken.randomBytes(characters)
        return OneTimeCode(canonical: String(bytes.map { alphabet[Int($0 & 31)] }))
    }

    private init(canonical: String) { self.canonical = canonical }

    /// What a person typed, read by Crockford's rules: case-insensitive, spaces and hyphens
    /// ignored, `I`/`L` read as `1` and `O` as `0`. Nil unless exactly `characters` remain,
    /// all of the alphabet (`U` is not: it is never issued).
    public init?(typed text: String, characters: Int) {
        var out: [Character] = []
        out.reserveCapacity(characters)
        for scalar in text.unicodeScalars {
            switch scalar {
            case " ", "-": continue
            case "I", "i", "L", "l": out.append("1")
            case "O", "o": out.append("0")
            default:
                guard scalar.isASCII else { return nil }
                let upper = Character(scalar).uppercased()
                guard upper.count == 1, let c = upper.first, Self.alphabet.contains(c) else { return nil }
                out.append(c)
            }
            if out.count > characters { return nil }
        }
        guard out.count == characters else { return nil }
        canonical = String(out)
    }

    /// Groups of four, as shown to a person.
    public var grouped: String {
        var out = ""
        for (i, c) in canonical.enumerated() {
            if i > 0 && i % 4 == 0 { out.append("-") }
            out.append(c)
        }
        return out
    }

    /// What is stored and looked up.
    public var hash: SecretHash { SecretHash(of: canonical) }

    /// Never the code itself: a code must not reach a log by being printed.
    public var description: String { "<code>" }

    /// Transfer codes: 16 characters, 80 bits.
    public static let transferCodeLength = 16
}
