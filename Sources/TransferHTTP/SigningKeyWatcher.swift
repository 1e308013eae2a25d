import Logging
import ServiceLifecycle
import TransferCore

/// Keeps this node's token service on the database's signing keys: every `interval` it reads
/// them and, when the current key or the published ones changed (a rotation on any node or
/// by `transfer keys rotate`, or a retired key's time in the JWKS ended), builds the token
/// service again. With `maxAge`, it also rotates a current key older than that; the
/// rotation names the key it replaces, so nodes deciding together rotate once.
struct SigningKeyWatcher: Service {
    let service: TransferService
    let tokenBox: TokenBox
    let issuer: String
    let audience: String
    let accessTTL: Duration
    let interval: Duration
    let maxAge: Duration?
    let logger: Logger

    func run() async throws {
        while !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                return  // shutting down
            }
            guard tokenBox.isLoaded else { continue }  // still starting
            do {
                try await check()
            } catch {
                logger.error("reading the signing keys failed", metadata: ["error.type": "\(type(of: error))"])
            }
        }
    }

    func check() async throws {
        let store = service.store
        var now = service.clock.now()
        var records = try await store.signingKeys()
        if let maxAge, let current = SigningKeys.current(records), current.createdAt + maxAge <= now {
            let result = try await service.rotateSigningKey(
                replacing: current.kid, by: .system, reason: "older than --signing-key-max-age \(maxAge.flagText)")
            if case .rotated(_, let new) = result {
                logger.notice("rotated the signing key", metadata: ["retired": "\(current.kid)", "current": "\(new.kid)"])
            }
            now = service.clock.now()
            records = try await store.signingKeys()
        }
        guard TokenService.fingerprint(records, accessTTL: accessTTL, now: now) != (try tokenBox.tokens).fingerprint else { return }
        let tokens = try await TokenService.make(records, issuer: issuer, audience: audience, accessTTL: accessTTL, now: now)
        tokenBox.set(tokens)
        logger.info("signing keys changed", metadata: ["current": "\(tokens.currentKid)", "published": "\(tokens.fingerprint.dropFirst().joined(separator: ","))"])
    }
}
