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
///   reboot), `read` **throws** (e.g. a ``StorageError``).
///
/// TransferKit never creates a device identity or an account because a read failed; it emits
/// ``TransferEvent/storageUnavailable(_:)`` instead. Implementations: ``KeychainCredentialStore``
/// (Apple platforms), ``FileCredentialStore`` and ``MemoryCredentialStore``.
public protocol CredentialStore: Sendable {
    /// The data stored under `key`, or `nil` when there is none. Throws when the store cannot be read.
    func read(_ key: String) throws -> Data?
    /// Stores `data` under `key`, replacing what was there.
    func write(_ data: Data, for key: String) throws
    /// Removes what is stored under `key`; nothing stored is not an error.
    func remove(_ key: String) throws
    /// Stores `data` under `key` only when nothing is stored there, in one step another process
    /// cannot split: returns nil when `data` was stored, else what is stored there (left as it is).
    ///
    /// TransferKit writes the device identity this way, so that an app and its extension starting
    /// for the first time at once end up with one identity, not the second overwriting the first.
    /// The default reads, then writes when nothing was there: enough for a store used by one
    /// process; implement it atomically for a store that several processes share.
    func add(_ data: Data, for key: String) throws -> Data?
}

extension CredentialStore {
    public func add(_ data: Data, for key: String) throws -> Data? {
        if let existing = try read(key) { return existing }
        try write(data, for: key)
        return nil
    }
}

extension CredentialStore {
    /// Decodes what is stored under `key`; nil when nothing is. Data that does not decode throws
    /// ``StorageError/Kind/undecodable`` (the caller decides whether it may be dropped).
    func read<T: Decodable>(_ type: T.Type, _ key: String) throws -> T? {
        guard let data = try read(key) else { return nil }
        do {
            return try Wire.decoder().decode(type, from: data)
        } catch {
            throw StorageError(.undecodable, reason: "the item \(key) does not decode")
        }
    }
}

/// A store that cannot be used now, and why: not the same as empty.
///
/// ``kind`` tells the cases apart that an app handles differently: ``Kind/locked`` (wait for
/// the first unlock), ``Kind/missingEntitlement`` (a build without the Keychain access group it
/// names: a bug to fix, not to wait out), ``Kind/duplicateItem``, ``Kind/undecodable`` (the
/// item is there but is not what TransferKit wrote). ``status`` keeps the store's own number
/// (an `OSStatus` for the Keychain, an `errno` for files).
public struct StorageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Why a store cannot be used. An open set, like ``TransferError/Code``.
    public struct Kind: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The phone is locked (before its first unlock since a reboot): try again after unlock.
        public static let locked = Kind(rawValue: "locked")
        /// The app lacks the entitlement the item needs (`errSecMissingEntitlement`, −34018):
        /// a Keychain access group that is not in the app's entitlements, or no entitlements
        /// at all (an unsigned test host). Waiting does not help.
        public static let missingEntitlement = Kind(rawValue: "missing_entitlement")
        /// An item that should have been replaced already exists (`errSecDuplicateItem`).
        public static let duplicateItem = Kind(rawValue: "duplicate_item")
        /// The item is there but does not decode (written by something else, or damaged).
        public static let undecodable = Kind(rawValue: "undecodable")
        /// The file system refused (see ``StorageError/status``, an `errno`).
        public static let io = Kind(rawValue: "io")
        /// Anything else (see ``StorageError/status``).
        public static let other = Kind(rawValue: "other")
    }

    /// Why the store cannot be used.
    public let kind: Kind
    /// The store's own number: an `OSStatus` (Keychain) or an `errno` (files); nil when there is none.
    public let status: Int32?
    /// What went wrong, for logs (never a stored value).
    public let reason: String

    /// A failure of `kind`, with the store's `status`.
    public init(_ kind: Kind, status: Int32? = nil, reason: String) {
        self.kind = kind
        self.status = status
        self.reason = reason
    }

    /// A failure of kind ``Kind/other`` (TransferKit 1's `CredentialStoreUnavailable(_:)`).
    public init(_ reason: String) {
        self.init(.other, reason: reason)
    }

    /// `error` as a storage error: itself when it is one; ``Kind/undecodable`` for a decoding error.
    init(_ error: any Error) {
        switch error {
        case let error as StorageError: self = error
        case let error as TransferError where error.storage != nil: self = error.storage!
        case is DecodingError: self.init(.undecodable, reason: "a stored item does not decode")
        default: self.init(.other, reason: "\(error)")
        }
    }

    public var description: String {
        "StorageError(\(kind)\(status.map { ", status \($0)" } ?? "")): \(reason)"
    }
}

/// TransferKit 1's name of ``StorageError``.
public typealias CredentialStoreUnavailable = StorageError

/// Items in memory behind a lock, which a flag can make unavailable (a locked phone): what the
/// in-memory stores share.
final class MemoryItems: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [String: Data]
    private var available = true

    init(_ items: [String: Data]) { storage = items }

    var isAvailable: Bool {
        get { locked { available } }
        set { locked { available = newValue } }
    }

    var all: [String: Data] { locked { storage } }

    /// `body` on the items, or ``StorageError/Kind/locked`` while unavailable.
    func withItems<T>(_ body: (inout [String: Data]) throws -> T) throws -> T {
        try locked {
            guard available else { throw StorageError(.locked, reason: "locked") }
            return try body(&storage)
        }
    }

    private func locked<T>(_ body: () throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body()
    }
}

/// A store in memory: for tests and simulations. ``isAvailable`` set to false makes it act like
/// a Keychain before the first unlock.
public final class MemoryCredentialStore: CredentialStore, Sendable {
    private let memory: MemoryItems

    /// A store holding `items` (e.g. another store's ``items``, to simulate a backup).
    public init(_ items: [String: Data] = [:]) {
        memory = MemoryItems(items)
    }

    /// False makes every call throw ``StorageError/Kind/locked`` (a locked phone).
    public var isAvailable: Bool {
        get { memory.isAvailable }
        set { memory.isAvailable = newValue }
    }

    /// Everything stored, by key.
    public var items: [String: Data] { memory.all }

    public func read(_ key: String) throws -> Data? { try memory.withItems { $0[key] } }

    public func write(_ data: Data, for key: String) throws { try memory.withItems { $0[key] = data } }

    public func remove(_ key: String) throws { try memory.withItems { $0[key] = nil } }

    public func add(_ data: Data, for key: String) throws -> Data? {
        try memory.withItems { items in
            if let existing = items[key] { return existing }
            items[key] = data
            return nil
        }
    }
}

/// A store of one file per key in a directory.
///
/// Files are created with permissions `0600` (the directory `0700`) and written atomically:
/// a temporary file in the same directory, synced, then renamed over the old one. A missing
/// file reads as empty; any other failure to read throws (``StorageError/Kind/io`` with the
/// `errno`, or ``StorageError/Kind/locked`` for `EPERM`, which is what a file protected until
/// unlock answers on iOS).
///
/// Each file gets ``protection`` (by default `completeUntilFirstUserAuthentication`, set
/// explicitly, so that an app whose default is `NSFileProtectionComplete` can still read the
/// account list when iOS launches it in the background). On iOS, files in Application Support
/// are included in backups, which is what the account list (``TransferClient``'s `accountList`
/// store) needs. Keep the device identity in the Keychain instead.
public struct FileCredentialStore: CredentialStore {
    /// The directory holding the files.
    public let directory: URL
    /// The data protection class of every file written (ignored where there is none, e.g. Linux).
    public let protection: FileProtectionType?

    /// A store in `directory`, created (`0700`) on the first write; its files get `protection`.
    public init(directory: URL, protection: FileProtectionType? = .completeUntilFirstUserAuthentication) {
        self.directory = directory
        self.protection = protection
    }

    public func read(_ key: String) throws -> Data? {
        let path = fileURL(key).path
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else {
            let code = errno
            if code == ENOENT { return nil }
            throw Self.failure(code, "cannot open \(key)")
        }
        defer { close(fd) }
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = buffer.withUnsafeMutableBytes { posixRead(fd, $0.baseAddress, $0.count) }
            if count == 0 { return data }
            if count < 0 {
                let code = errno
                if code == EINTR { continue }
                throw Self.failure(code, "cannot read \(key)")
            }
            data.append(contentsOf: buffer[0..<count])
        }
    }

    public func write(_ data: Data, for key: String) throws {
        let temporary = try temporaryFile(holding: data, for: key)
        guard rename(temporary.path, fileURL(key).path) == 0 else {
            let code = errno
            unlink(temporary.path)
            throw Self.failure(code, "cannot replace \(key)")
        }
    }

    /// Links the file in place only when there is none (`link(2)` never replaces a file).
    public func add(_ data: Data, for key: String) throws -> Data? {
        let temporary = try temporaryFile(holding: data, for: key)
        defer { unlink(temporary.path) }
        while true {
            if link(temporary.path, fileURL(key).path) == 0 { return nil }
            let code = errno
            guard code == EEXIST else { throw Self.failure(code, "cannot add \(key)") }
            if let existing = try read(key) { return existing }  // else removed meanwhile: link again
        }
    }

    /// A new file of `data` in the store's directory, synced, with its permissions and protection.
    private func temporaryFile(holding data: Data, for key: String) throws -> URL {
        do {
            try FileManager.default.createDirectory(
                at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw StorageError(.io, reason: "cannot create the store's directory: \(error)")
        }
        let temporary = directory.appendingPathComponent(".\(key).\(UUID().uuidString).tmp", isDirectory: false)
        let fd = open(temporary.path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw Self.failure(errno, "cannot create a temporary file for \(key)") }
        do {
            _ = fchmod(fd, 0o600)  // whatever the umask
            let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
            try handle.write(contentsOf: data)
            try handle.synchronize()
            try handle.close()
            #if !os(macOS)  // macOS has no per-file protection classes
            if let protection {
                try FileManager.default.setAttributes([.protectionKey: protection], ofItemAtPath: temporary.path)
            }
            #endif
        } catch {
            unlink(temporary.path)
            throw StorageError(.io, reason: "cannot write \(key): \(error)")
        }
        return temporary
    }

    public func remove(_ key: String) throws {
        if unlink(fileURL(key).path) != 0 && errno != ENOENT {
            throw Self.failure(errno, "cannot remove \(key)")
        }
    }

    /// `EPERM` is what iOS answers for a file protected until unlock; every other `errno` is I/O.
    static func failure(_ code: Int32, _ reason: String) -> StorageError {
        StorageError(code == EPERM ? .locked : .io, status: code, reason: "\(reason): errno \(code)")
    }

    private func fileURL(_ key: String) -> URL {
        precondition(
            !key.isEmpty && !key.hasPrefix(".")
                && key.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0) },
            "FileCredentialStore: unsupported key \(key)")
        return directory.appendingPathComponent(key, isDirectory: false)
    }
}

/// POSIX `read(2)` (a top-level name, apart from ``FileCredentialStore/read(_:)``).
private func posixRead(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(fd, buffer, count)
}
