import Logging
import ServiceLifecycle
import TransferCore

/// Background housekeeping: every `interval`, one `prune` round on the store (expired sessions'
/// secrets, rotated refresh tokens, expired and old transfers, old audit events, and with
/// `--inactive-account-ttl` inactive accounts). On PostgreSQL only one node prunes at a time;
/// the others skip their round.
struct Pruner: Service {
    let store: any TransferStore
    let clock: any WallClock
    let retention: Duration
    /// Signing keys retired longer ago than this, plus their time in the JWKS and a day, are deleted.
    let accessTTL: Duration
    /// nil: inactive accounts are kept.
    let inactivity: InactivityPolicy?
    let interval: Duration
    /// The first round waits this long: start-up (migrations) is over by then.
    let firstDelay: Duration
    let logger: Logger
    static let batchSize = 5_000

    func run() async throws {
        var delay = firstDelay
        while !Task.isShuttingDownGracefully {
            do {
                let wait = delay
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) }
            } catch {
                return  // shutting down
            }
            delay = interval
            let now = clock.now()
            let started = ContinuousClock.now
            do {
                guard let counts = try await store.prune(PruneCutoffs(
                    now: now, retainedSince: now - retention,
                    signingKeysRetiredBefore: SigningKeys.pruneRetiredBefore(now: now, accessTTL: accessTTL),
                    inactiveBefore: inactivity?.inactiveBefore(now)), batchSize: Self.batchSize)
                else {
                    logger.debug("prune skipped: another node is pruning")
                    continue
                }
                logger.info("pruned", metadata: ["rows": "\(counts.total)", "detail": "\(counts)", "duration": "\(ContinuousClock.now - started)"])
            } catch {
                logger.error("pruning failed", metadata: ["error.type": "\(type(of: error))"])
            }
        }
    }
}
