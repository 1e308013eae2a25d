import Logging
import ServiceLifecycle
import TransferCore
import TransferSettings

/// Keeps this node's token service on the database's signing keys: every `interval` it reads
/// them and, when the current key or the published ones changed (a rotation on any node or
/// by `transfer keys rotate`, or a retired key's time in the JWKS ended), builds the token
/// service again. With `maxAge`, it also rotates a current key older than that; the
/// rotation names the key it replaces, so nodes deciding together rotate once. Keys sealed
/// under a key-encryption key are opened with `kek`; when they no longer open with it (another
/// key-encryption key since `transfer keys rotate-kek`), the node keeps the keys it has and says
/// so in its log until it is restarted with the new file.
struct SigningKeyWatcher: Service {
    let service: TransferService
    let tokenBox: TokenBox
    let kek: KeyEncryptionKey?
    let issuer: String
    let audience: String
    let accessTTL: Duration
    let interval: Duration
    let maxAge: Duration?
    let logger: Logger

    func run() async throws {
        // A problem with the keys at rest is logged when it appears, not on every poll.
        var reported: SigningKeyAtRestError?
        while !Task.isShuttingDownGracefully {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                return  // shutting down
            }
            guard tokenBox.isLoaded else { continue }  // still starting
            do {
                try await check()
                reported = nil
            } catch let problem as SigningKeyAtRestError {
                if problem != reported {
                    logger.error("the signing keys cannot be read; this node keeps the keys it has", metadata: ["problem": "\(problem.advice)"])
                }
                reported = problem
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
                replacing: current.kid, kek: kek, by: .system, reason: "older than --signing-key-max-age \(maxAge.flagText)")
            switch result {
            case .rotated(_, let new): logger.notice("rotated the signing key", metadata: ["retired": "\(current.kid)", "current": "\(new.kid)"])
            case .alreadyRotated: break
            case .refused(let problem): throw problem
            }
            now = service.clock.now()
            records = try await store.signingKeys()
        }
        guard TokenService.fingerprint(records, accessTTL: accessTTL, now: now) != (try tokenBox.tokens).fingerprint else { return }
        let tokens = try await TokenService.make(records, kek: kek, issuer: issuer, audience: audience, accessTTL: accessTTL, now: now)
        tokenBox.set(tokens)
        logger.info("signing keys changed", metadata: ["current": "\(tokens.currentKid)", "published": "\(tokens.fingerprint.dropFirst().joined(separator: ","))"])
    }
}
