import Foundation
import Logging
import Testing
import TransferHTTP
@testable import TransferTestSupport

/// The server's log (`LogSink`): the lines swift-log's stream handler wrote, written in
/// batches off the request path, and never dropped without saying so.
@Suite("The log sink")
struct LogSinkTests {
    /// A sink on a new file; its thread would write every hour, so only `flush()` writes.
    static func sink(capacity: Int = 1 << 20) throws -> (LogSink, URL) {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("log-sink-\(UUID().uuidString).log")
        let fd = open(url.path, O_CREAT | O_WRONLY | O_APPEND, 0o600)
        try #require(fd >= 0, "cannot open \(url.path)")
        return (LogSink(fileDescriptor: fd, capacity: capacity, interval: .seconds(3600)), url)
    }

    @Test("a request line keeps its fields, in the stream handler's format, once flushed")
    func format() throws {
        let (sink, url) = try Self.sink()
        defer { try? FileManager.default.removeItem(at: url) }
        var logger = Logger(label: "transfer-server") { sink.handler(label: $0) }
        logger[metadataKey: "hb.request.id"] = "abc"
        logger.info("request", metadata: ["route": "/v1/devices/login", "status": "200", "duration_ms": "0.41", "account": "a1"])
        #expect(try String(contentsOf: url, encoding: .utf8).isEmpty, "nothing is written before the sink's turn")
        sink.flush()
        let line = try String(contentsOf: url, encoding: .utf8)
        let pattern = #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} info transfer-server: account=a1 duration_ms=0.41 hb.request.id=abc route=/v1/devices/login status=200 \[TransferTests\] request\n$"#
        #expect(line.range(of: pattern, options: .regularExpression) != nil, "got: \(line)")
    }

    @Test("past its capacity the sink drops lines, counts them, and says so in the log")
    func overload() throws {
        let (sink, url) = try Self.sink(capacity: 1000)
        defer { try? FileManager.default.removeItem(at: url) }
        let logger = Logger(label: "t") { sink.handler(label: $0) }
        for i in 0..<50 { logger.warning("line \(i)") }
        sink.flush()
        let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n")
        let kept = lines.filter { $0.contains("] line ") }.count
        #expect(kept > 0 && kept < 50)
        #expect(sink.dropped == 50 - kept)
        #expect(lines.last?.contains("\(50 - kept) log lines dropped") == true, "the drop is reported: \(lines.last ?? "")")
        logger.warning("after")
        sink.flush()
        #expect(try String(contentsOf: url, encoding: .utf8).hasSuffix("] after\n"), "the sink writes again once it caught up")
    }
}
