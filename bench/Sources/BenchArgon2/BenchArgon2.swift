import Foundation
import Synchronization
import TransferArgon2

/// The raw libargon2 rate on this machine: `threads` threads verifying one PHC string with
/// the given parameters for `seconds`, as fast as they can. Prints verifications per second.
/// Usage: argon2-bench MEMORY_KIB ITERATIONS PARALLELISM THREADS SECONDS
@main
struct BenchArgon2 {
    static func main() {
        let a = CommandLine.arguments.dropFirst().compactMap { Int($0) }
        guard a.count == 5 else {
            FileHandle.standardError.write(Data("usage: argon2-bench MEMORY_KIB ITERATIONS PARALLELISM THREADS SECONDS\n".utf8))
            exit(2)
        }
        let params = Argon2Parameters(memoryKiB: UInt32(a[0]), iterations: UInt32(a[1]), parallelism: UInt32(a[2]))
        let phc = try! Argon2Hasher.hashNow("bench-password-1", parameters: params)
        let deadline = ContinuousClock.now + .seconds(a[4])
        let done = Atomic<Int>(0)
        let start = ContinuousClock.now
        let threads = (0..<a[3]).map { _ in
            Thread {
                while ContinuousClock.now < deadline {
                    precondition(Argon2Hasher.verifyNow("bench-password-1", phc: phc))
                    done.add(1, ordering: .relaxed)
                }
            }
        }
        threads.forEach { $0.start() }
        while threads.contains(where: { !$0.isFinished }) { usleep(10_000) }
        let elapsed = ContinuousClock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(String(format: "%.2f", Double(done.load(ordering: .relaxed)) / seconds))
    }
}
