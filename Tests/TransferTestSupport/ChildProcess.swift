import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A child process started with `posix_spawn`, for the tests that run executables.
///
/// Not Foundation's `Process`: on Linux (Swift 6.3.1) its `run()` now and then crashes the
/// whole test run with a bad pointer dereference while it closes the parent's descriptors in
/// the child (a 256-byte over-read in `findMaximumOpenFromProcSelfFD`,
/// swift-corelibs-foundation#5472, fixed after 6.3.1); CI met it once the suite spawned enough
/// processes. Its `waitUntilExit` also never returned for `pg_ctl start` (OutageTests).
///
/// Standard input, output and error are files (or `/dev/null`), never pipes: nothing can fill
/// up and block the child, and a test reads what a process wrote once it has ended.
final class ChildProcess: @unchecked Sendable {
    let executable: String
    let arguments: [String]
    /// nil: the test's own environment.
    let environment: [String: String]?
    let folder: URL?
    let stdin: String, stdout: String, stderr: String

    private let lock = NSLock()
    private var pid: pid_t = 0
    private var status: Int32?

    init(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, folder: URL? = nil,
        stdin: String = "/dev/null", stdout: String = "/dev/null", stderr: String = "/dev/null"
    ) {
        self.executable = executable.path
        self.arguments = arguments
        self.environment = environment
        self.folder = folder
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
    }

    /// glibc's spawn actions that Swift's Glibc module does not import (glibc 2.29 and 2.34).
    private typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) -> Int32
    private typealias AddClosefrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
    private static let addChdir = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addchdir_np")
        .map { unsafeBitCast($0, to: AddChdir.self) }
    private static let addClosefrom = dlsym(dlopen(nil, RTLD_NOW), "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: AddClosefrom.self) }

    /// Starts the process; throws, naming it, when it cannot be started.
    func run() throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, stdin, O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, stdout, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        // The test process's sockets and files stay out of the child.
        guard let closefrom = Self.addClosefrom, closefrom(&actions, 3) == 0 else {
            throw TestFailure("this glibc (before 2.34) cannot close the test's descriptors in a child")
        }
        if let folder {
            guard let chdir = Self.addChdir, chdir(&actions, folder.path) == 0 else {
                throw TestFailure("this glibc cannot start a process in \(folder.path)")
            }
        }
        // The child starts with no signal blocked and SIGTERM, SIGINT and SIGPIPE at their
        // defaults, whatever the spawning thread had.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), defaults = sigset_t()
        sigemptyset(&none)
        sigemptyset(&defaults)
        for signal in [SIGTERM, SIGINT, SIGPIPE] { sigaddset(&defaults, signal) }
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        let env = (environment ?? ProcessInfo.processInfo.environment).map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { env.forEach { free($0) } }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, executable, &actions, &attributes, argv, env)
        guard spawned == 0 else {
            throw TestFailure("\(executable) could not be started: \(String(cString: strerror(spawned)))")
        }
        lock.withLock { pid = child }
    }

    var processIdentifier: Int32 { lock.withLock { pid } }

    /// Reaps the child if it has ended; its exit status once it has.
    private func reap() -> Int32? {
        lock.withLock {
            if let status { return status }
            var raw: Int32 = 0
            precondition(pid != 0, "\(executable) was never started (call run())")
            let reaped = waitpid(pid, &raw, WNOHANG)
            if reaped == -1 && errno == ECHILD {
                status = -1  // reaped elsewhere: it has ended, how is unknown
                return status
            }
            guard reaped == pid else { return nil }
            // WIFEXITED: the exit code; ended by a signal: 128 + the signal, as a shell says it, so
            // that a crash (SIGILL 4, SIGSEGV 11) never reads as an expected exit code like 4.
            status = (raw & 0x7f) == 0 ? (raw >> 8) & 0xff : 128 + (raw & 0x7f)
            return status
        }
    }

    var isRunning: Bool { reap() == nil }

    /// Sends `signal` while the process runs: a reaped pid may already be another process's.
    func signal(_ signal: Int32) {
        _ = reap()
        lock.withLock { if status == nil { _ = kill(pid, signal) } }
    }

    /// SIGTERM.
    func terminate() { signal(SIGTERM) }

    /// Blocks until the process has ended (polling, so `isRunning` stays answerable meanwhile).
    func waitUntilExit() {
        while reap() == nil { usleep(5_000) }
    }

    /// The exit code, or 128 + the signal that ended the process; call after `waitUntilExit`.
    var terminationStatus: Int32 { reap() ?? -1 }

    /// Runs `executable` to its end and returns what it wrote; `input` is its standard input.
    static func capture(
        _ executable: URL, _ arguments: [String], environment: [String: String]? = nil, folder: URL? = nil,
        input: Data? = nil
    ) throws -> (code: Int32, out: Data, err: Data) {
        let base = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString)")
        let (inPath, outPath, errPath) = (base.path + ".in", base.path + ".out", base.path + ".err")
        defer { for path in [inPath, outPath, errPath] { try? FileManager.default.removeItem(atPath: path) } }
        try (input ?? Data()).write(to: URL(fileURLWithPath: inPath))
        let child = ChildProcess(
            executable, arguments, environment: environment, folder: folder, stdin: inPath, stdout: outPath, stderr: errPath)
        try child.run()
        child.waitUntilExit()
        let read = { (path: String) in (try? Data(contentsOf: URL(fileURLWithPath: path))) ?? Data() }
        return (child.terminationStatus, read(outPath), read(errPath))
    }
}
