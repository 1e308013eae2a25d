#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Logging
import Synchronization

/// Where the server's log lines go: standard error, as swift-log's `StreamLogHandler` writes
/// them (the same text), but in batches. A line is formatted on the thread that logs it,
/// straight into a shared buffer; a thread of the sink's own writes the buffer out every few
/// milliseconds with one `write(2)`. The request path no longer makes a system call per line
/// (swift-log's stream flushes every line to the unbuffered standard error under `flockfile`).
///
/// Nothing is dropped silently: past `capacity` bytes waiting (the disk or the pipe stopped
/// taking them) new lines are dropped and counted, and the count is written as a line of its
/// own once the sink catches up. `flush()` writes what waits, at once: at shutdown, and before
/// a line the process writes itself before it exits.
public final class LogSink: Sendable {
    /// The process's standard error.
    public static let standardError = LogSink(fileDescriptor: 2)

    private struct State {
        var pending: [UInt8] = []
        var dropped = 0
        /// The second `stamp` was formatted for.
        var second = -1
        var stamp: [UInt8] = []
    }

    private let state = Mutex(State())
    private let fileDescriptor: Int32
    /// Bytes that may wait: 8 MiB, about 50 000 request lines.
    private let capacity: Int
    /// How long a line may wait before it is written.
    private let interval: Duration
    /// Lines dropped since the start.
    private let droppedTotal = Atomic<Int>(0)

    public init(fileDescriptor: Int32, capacity: Int = 8 << 20, interval: Duration = .milliseconds(5)) {
        self.fileDescriptor = fileDescriptor
        self.capacity = capacity
        self.interval = interval
        let thread = Thread { [self] in
            while true {
                Thread.sleep(forTimeInterval: Double(interval.components.attoseconds) / 1e18 + Double(interval.components.seconds))
                flush()
            }
        }
        thread.name = "log-sink"
        thread.start()
    }

    /// Lines dropped because too much was waiting, since the start.
    public var dropped: Int { droppedTotal.load(ordering: .relaxed) }

    /// A handler for a logger labelled `label`.
    public func handler(label: String) -> any LogHandler { Handler(label: label, sink: self) }

    /// Writes what waits, now.
    public func flush() {
        let (bytes, dropped): ([UInt8], Int) = state.withLock { state in
            defer {
                state.pending.removeAll(keepingCapacity: true)
                state.dropped = 0
            }
            return (state.pending, state.dropped)
        }
        if !bytes.isEmpty { write(bytes) }
        if dropped > 0 {
            write(Array("\(Self.now()) warning transfer-server: [TransferHTTP] \(dropped) log lines dropped: the log could not be written fast enough\n".utf8))
        }
    }

    private func write(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.write(fileDescriptor, raw.baseAddress! + offset, raw.count - offset)
                if n > 0 {
                    offset += n
                } else if n < 0 && errno == EINTR {
                    continue
                } else {
                    return  // the log is gone (a closed pipe): nothing else to write to
                }
            }
        }
    }

    /// One line, formatted into the buffer under its lock: `time level label: metadata [source] message`.
    fileprivate func append(level: Logger.Level, label: String, metadata: Logger.Metadata, source: String, message: String) {
        let second = time(nil)
        state.withLock { state in
            guard state.pending.count < capacity else {
                state.dropped += 1
                droppedTotal.add(1, ordering: .relaxed)
                return
            }
            if second != state.second {
                state.second = second
                state.stamp = Array(Self.format(second).utf8)
            }
            state.pending.append(contentsOf: state.stamp)
            state.pending.append(UInt8(ascii: " "))
            state.pending.append(contentsOf: level.rawValue.utf8)
            if !label.isEmpty {
                state.pending.append(UInt8(ascii: " "))
                state.pending.append(contentsOf: label.utf8)
            }
            state.pending.append(UInt8(ascii: ":"))
            for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
                state.pending.append(UInt8(ascii: " "))
                state.pending.append(contentsOf: key.utf8)
                state.pending.append(UInt8(ascii: "="))
                state.pending.append(contentsOf: value.description.utf8)
            }
            state.pending.append(contentsOf: " [".utf8)
            state.pending.append(contentsOf: source.utf8)
            state.pending.append(contentsOf: "] ".utf8)
            state.pending.append(contentsOf: message.utf8)
            state.pending.append(UInt8(ascii: "\n"))
        }
    }

    private static func now() -> String { format(time(nil)) }

    /// Local time, as `StreamLogHandler` writes it: `2026-11-25T12:50:09+0000`.
    private static func format(_ seconds: time_t) -> String {
        var t = seconds
        var parts = tm()
        var buffer = [CChar](repeating: 0, count: 64)
        guard localtime_r(&t, &parts) != nil else { return "<unknown>" }
        let n = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &parts)
        return String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private struct Handler: LogHandler {
        let label: String
        let sink: LogSink
        var metadata: Logger.Metadata = [:]
        var metadataProvider: Logger.MetadataProvider?
        var logLevel: Logger.Level = .info

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var merged = metadata
            if let provided = metadataProvider?.get(), !provided.isEmpty {
                merged.merge(provided) { _, new in new }
            }
            if let explicit = event.metadata, !explicit.isEmpty {
                merged.merge(explicit) { _, new in new }
            }
            if let error = event.error {
                merged["error.message"] = "\(error)"
                merged["error.type"] = "\(String(reflecting: type(of: error)))"
            }
            sink.append(level: event.level, label: label, metadata: merged, source: event.source, message: event.message.description)
        }
    }
}
