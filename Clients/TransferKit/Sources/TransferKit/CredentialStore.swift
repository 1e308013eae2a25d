import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where TransferKit keeps what must survive a relaunch: a few small items under fixed keys.
///
/// A store distinguishes *empty* from *unavailable*, and TransferKit relies on it:
/// - `read` returns `nil` only when nothing is stored under the key;
/// - when the store cannot be read now (on iOS, the Keychain before the first unlock after a
///   reboot), `read` **throws** (e.g. ``CredentialStoreUnavailable``).
///
/// TransferKit never creates a device identity or an account because a read failed; it emits
/// ``TransferEvent/storageUnavailable`` instead. Implementations: ``KeychainCredentialStore``
/// (Apple platforms), ``FileCredentialStore`` and ``MemoryCredentialStore``.
public protocol CredentialStore: Sendable {
    /// The data stored under `key`, or `nil` when there is none. Throws when the store cannot be read.
    func read(_ key: String) throws -> Data?
    /// Stores `data` under `key`, replacing what was there.
    func write(_ data: Data, for key: String) throws
    /// Removes what is stored under `key`; nothing stored is not an error.
    func remove(_ key: String) throws
}

extension CredentialStore {
    /// Decodes what is stored under `key`; nil when nothing is. Data that does not decode throws
    /// (it is never silently replaced).
    func read<T: Decodable>(_ type: T.Type, _ key: String) throws -> T? {
        guard let data = try read(key) else { return nil }
        return try Wire.decoder().decode(type, from: data)
    }
}

/// The store cannot be used now (locked, or an I/O error); not the same as empty.
public struct CredentialStoreUnavailable: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, for logs.
    public let reason: String
    /// An unavailable store, for `reason`.
    public init(_ reason: String) { self.reason = reason }
    public var description: String { "Credential store unavailable: \(reason)" }
}

/// A store in memory: for tests and simulations. ``isAvailable`` set to false makes it act like
/// a Keychain before the first unlock.
public final class MemoryCredentialStore: CredentialStore, @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [String: Data]
    private var available = true

    /// A store holding `items` (e.g. another store's ``items``, to simulate a backup).
    public init(_ items: [String: Data] = [:]) {
        storage = items
    }

    /// False makes every call throw ``CredentialStoreUnavailable`` (a locked phone).
    public var isAvailable: Bool {
        get { locked { available } }
        set { locked { available = newValue } }
    }

    /// Everything stored, by key.
    public var items: [String: Data] { locked { storage } }

    public func read(_ key: String) throws -> Data? {
        try locked {
            guard available else { throw CredentialStoreUnavailable("locked") }
            return storage[key]
        }
    }

    public func write(_ data: Data, for key: String) throws {
        try locked {
            guard available else { throw CredentialStoreUnavailable("locked") }
            storage[key] = data
        }
    }

    public func remove(_ key: String) throws {
        try locked {
            guard available else { throw CredentialStoreUnavailable("locked") }
            storage[key] = nil
        }
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}

/// A store of one file per key in a directory.
///
/// Files are created with permissions `0600` (the directory `0700`) and written atomically:
/// a temporary file in the same directory, synced, then renamed over the old one. A missing
/// file reads as empty; any other failure to read throws (unavailable).
///
/// On iOS, files in Application Support are protected until the first unlock by default and are
/// included in backups, which is what the account list (``TransferClient``'s `accountList`
/// store) needs. Keep the device identity in the Keychain instead.
public struct FileCredentialStore: CredentialStore {
    /// The directory holding the files.
    public let directory: URL

    /// A store in `directory`, created (`0700`) on the first write.
    public init(directory: URL) {
        self.directory = directory
    }

    public func read(_ key: String) throws -> Data? {
        let url = fileURL(key)
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        do {
            return try Data(contentsOf: url)
        } catch {
            throw CredentialStoreUnavailable("cannot read \(url.path): \(error)")
        }
    }

    public func write(_ data: Data, for key: String) throws {
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw CredentialStoreUnavailable("cannot create \(directory.path): \(error)")
        }
        let target = fileURL(key)
        let temporary = directory.appendingPathComponent(".\(key).\(UUID().uuidString).tmp", isDirectory: false)
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw CredentialStoreUnavailable("cannot create \(temporary.path): errno \(errno)") }
        do {
            _ = fchmod(fd, 0o600)  // whatever the umask
            let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
            try handle.write(contentsOf: data)
            try handle.synchronize()
            try handle.close()
        } catch {
            unlink(temporary.path)
            throw CredentialStoreUnavailable("cannot write \(temporary.path): \(error)")
        }
        guard rename(temporary.path, target.path) == 0 else {
            let code = errno
            unlink(temporary.path)
            throw CredentialStoreUnavailable("cannot replace \(target.path): errno \(code)")
        }
    }

    public func remove(_ key: String) throws {
        if unlink(fileURL(key).path) != 0 && errno != ENOENT {
            throw CredentialStoreUnavailable("cannot remove \(fileURL(key).path): errno \(errno)")
        }
    }

    private func fileURL(_ key: String) -> URL {
        precondition(
            !key.isEmpty && !key.hasPrefix(".")
                && key.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0) },
            "FileCredentialStore: unsupported key \(key)")
        return directory.appendingPathComponent(key, isDirectory: false)
    }
}
