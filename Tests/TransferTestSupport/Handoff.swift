import TransferCore
@testable import TransferHTTP

/// The sibling apps of the hand-off tests, and what one keeps while it waits for the host.
enum Handoff {
    static let news = "com.example.news"
    static let travel = "com.example.travel"
    /// What the sibling app keeps while it waits for the host: its verifier, and the challenge it sends.
    struct PKCEPair {
        let verifier = RandomToken.make()
        var challenge: String { PKCE.challenge(for: verifier) }
    }
}
