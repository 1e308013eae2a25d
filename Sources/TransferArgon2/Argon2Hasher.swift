import CArgon2
#if canImport(Glibc)
import Glibc
#endif
import NIOPosix
import Synchronization
import TransferCore

/// argon2id parameters (RFC 9106 / OWASP: m=19456 KiB, t=2, p=1 by default).
public struct Argon2Parameters: Sendable, Equatable {
    public var memoryKiB: UInt32
    public var iterations: UInt32
    public var parallelism: UInt32

    public init(memoryKiB: UInt32 = 19456, iterations: UInt32 = 2, parallelism: UInt32 = 1) {
        self.memoryKiB = memoryKiB
        self.iterations = iterations
        self.parallelism = parallelism
    }
}

/// argon2id on a bounded pool of its own threads, never on an event loop.
///
/// `workers` threads hash at once; up to `queueDepth` more requests wait. Past that the
/// hasher refuses at once with `TransferError.overloaded`, so memory stays bounded by
/// `workers × memoryKiB` and the event loops stay free for logins. Claims come first: a
/// new hash (a set-up) is refused once all but the last quarter of the queue is taken, which
/// only verifications (claims) may use, so a flood of set-ups never makes a claim answer 503.
public final class Argon2Hasher: PasswordHasher {
    public let parameters: Argon2Parameters
    public let workers: Int
    public let queueDepth: Int
    private let pool: NIOThreadPool
    private let admitted = Atomic<Int>(0)
    private let running = Atomic<Int>(0)
    private let peakRunning = Atomic<Int>(0)
    /// Called with the time each hash or verification took, in seconds.
    private let onTiming: @Sendable (Double) -> Void

    public init(
        parameters: Argon2Parameters = Argon2Parameters(), workers: Int, queueDepth: Int,
        onTiming: @escaping @Sendable (Double) -> Void = { _ in }
    ) {
        precondition(workers > 0 && queueDepth >= 0)
        self.parameters = parameters
        self.workers = workers
        self.queueDepth = queueDepth
        self.onTiming = onTiming
        pool = NIOThreadPool(numberOfThreads: workers)
        pool.start()
    }

    public func shutdown() async throws { try await pool.shutdownGracefully() }

    /// Requests admitted and not finished (running plus waiting).
    public var inFlight: Int { admitted.load(ordering: .relaxed) }
    /// Requests waiting for a worker.
    public var queued: Int { max(0, inFlight - running.load(ordering: .relaxed)) }
    /// The most hashes that ever ran at the same time.
    public var peakConcurrentHashes: Int { peakRunning.load(ordering: .relaxed) }
    /// The most memory argon2 can hold at once, in KiB.
    public var memoryBoundKiB: Int { workers * Int(parameters.memoryKiB) }

    /// The places of the queue only claims may take: its last quarter.
    public var reservedForClaims: Int { (queueDepth + 3) / 4 }

    /// A set-up's hash: waits only in the first three quarters of the queue.
    public func hash(_ password: String) async throws -> String {
        let p = parameters
        return try await run(capacity: workers + queueDepth - reservedForClaims) { try Self.hashNow(password, parameters: p) }
    }

    /// A claim's verification: may wait anywhere in the queue.
    public func verify(_ password: String, against phc: String) async throws -> Bool {
        try await run(capacity: workers + queueDepth) { Self.verifyNow(password, phc: phc) }
    }

    private func run<T: Sendable>(capacity: Int, _ work: @escaping @Sendable () throws -> T) async throws -> T {
        guard admitted.wrappingAdd(1, ordering: .relaxed).newValue <= capacity else {
            admitted.wrappingSubtract(1, ordering: .relaxed)
            throw TransferError.overloaded(retryAfterSeconds: 1)
        }
        defer { admitted.wrappingSubtract(1, ordering: .relaxed) }
        return try await pool.runIfActive { [self] in
            Self.yieldToEventLoops()
            let now = running.wrappingAdd(1, ordering: .relaxed).newValue
            _ = peakRunning.max(now, ordering: .relaxed)
            defer { running.wrappingSubtract(1, ordering: .relaxed) }
            let start = ContinuousClock.now
            defer {
                let d = ContinuousClock.now - start
                onTiming(Double(d.components.seconds) + Double(d.components.attoseconds) / 1e18)
            }
            return try work()
        }
    }

    public enum Argon2Error: Error { case failed(Int32) }

    /// Hash workers run at a lower scheduling priority (nice 10, per thread on Linux), so the
    /// event loops answering logins get the CPU first while claims saturate the pool.
    static func yieldToEventLoops() {
        #if os(Linux)
        // On Linux the nice value is per thread, and `who == 0` means the calling thread.
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 10)
        #endif
    }

    /// Hashes on the calling thread: a PHC string with a 16-byte random salt and a 32-byte tag.
    public static func hashNow(_ password: String, parameters p: Argon2Parameters) throws -> String {
        var rng = SystemRandomNumberGenerator()
        let salt = (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &rng) }
        let hashLength = 32
        let encodedLength = argon2_encodedlen(p.iterations, p.memoryKiB, p.parallelism, UInt32(salt.count), UInt32(hashLength), Argon2_id)
        var encoded = [CChar](repeating: 0, count: encodedLength)
        let pwd = Array(password.utf8)
        let status = argon2id_hash_encoded(
            p.iterations, p.memoryKiB, p.parallelism, pwd, pwd.count, salt, salt.count, hashLength, &encoded, encodedLength)
        guard status == ARGON2_OK.rawValue else { throw Argon2Error.failed(status) }
        return String(decoding: encoded.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Verifies on the calling thread; false for a mismatch or an unreadable hash.
    public static func verifyNow(_ password: String, phc: String) -> Bool {
        let pwd = Array(password.utf8)
        return argon2id_verify(phc, pwd, pwd.count) == ARGON2_OK.rawValue
    }
}
