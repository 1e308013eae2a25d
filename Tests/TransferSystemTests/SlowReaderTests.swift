import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOEmbedded
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import NIOPosix
import Synchronization
import Testing
@testable import TransferHTTP
@testable import TransferTestSupport

/// Clients that pipeline requests and never read the answers (contract v1.3, slow readers):
/// such a connection once stayed open past `--idle-timeout` holding megabytes of requests
/// decoded ahead of their answers.
@Suite("Slow readers")
struct SlowReaderTests {
    static let healthz = "GET /healthz HTTP/1.1\r\nHost: test\r\n\r\n"

    @Test("a client that pipelines requests and never reads the answers is closed after --idle-timeout, answers still owed")
    func pipelinedUnreadClosed() async throws {
        try await withLiveServer({ $0.idleTimeout = .seconds(2) }) { server, _ in
            // 100 answers of openapi.yaml (100 KiB each): far more than socket buffers hold.
            let count = 100
            let reader = try await SlowReader.connect(port: server.port)
            reader.send(String(repeating: "GET /openapi.yaml HTTP/1.1\r\nHost: test\r\n\r\n", count: count))
            try await Task.sleep(for: .seconds(6))
            let received = try await reader.readUntilClosed(within: .seconds(30))
            #expect(received.closed, "the connection was still open 36 s after its client stopped reading (--idle-timeout 2s)")
            let one = try await SlowReader.answerSize(port: server.port, "/openapi.yaml")
            let whole = try #require(one) * count
            #expect(received.bytes < whole, "the server waited for its unread answers: all \(count) were sent once the client read")
        }
    }

    @Test("requests pipelined past the bound of unanswered ones are not decoded, and no read is asked of the socket until answers go out")
    func readingStopsAtTheBound() throws {
        let state = ConnectionGuard(
            limits: .init(idleTimeout: .seconds(60), requestTimeout: .seconds(10)), metrics: ServiceMetrics(), logger: Logger(label: "test"))
        let channel = EmbeddedChannel()
        let reads = ReadCounter()
        let pipeline = channel.pipeline.syncOperations
        try pipeline.addHandler(reads)
        try pipeline.addHandler(ConnectionGuard.ByteWatcher(state))
        try pipeline.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
        try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        try pipeline.addHandler(ConnectionGuard.PartWatcher(state))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()

        let total = 2_000  // 70 KB of requests in one read
        try channel.writeInbound(ByteBuffer(string: String(repeating: Self.healthz, count: total)))
        func heads() throws -> Int {
            var n = 0
            while let part = try channel.readInbound(as: HTTPRequestPart.self) { if case .head = part { n += 1 } }
            return n
        }
        let first = try heads()
        #expect(first >= 1 && first <= 64, "\(first) of \(total) pipelined requests were decoded before any was answered")
        let before = reads.count.load(ordering: .relaxed)
        channel.read()
        #expect(reads.count.load(ordering: .relaxed) == before, "the socket was asked for more while \(first) answers are owed")

        // Each answer lets more through, and every request is decoded in the end.
        var decoded = first
        var answered = 0
        var mostAhead = first
        while answered < decoded {
            try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok, headerFields: [.contentLength: "0"])))
            try channel.writeOutbound(HTTPResponsePart.end(nil))
            channel.embeddedEventLoop.run()
            answered += 1
            decoded += try heads()
            mostAhead = max(mostAhead, decoded - answered)
        }
        #expect(mostAhead <= 64, "\(mostAhead) requests were decoded ahead of their answers")
        #expect(decoded == total, "only \(decoded) of \(total) requests were read once all answers went out")
        channel.read()
        channel.embeddedEventLoop.run()
        #expect(reads.count.load(ordering: .relaxed) > before, "reading did not resume once every answer went out")
        _ = try channel.finish(acceptAlreadyClosed: true)
    }
}

extension SlowReaderTests {
    @Test("a pipelined request the guard holds while earlier answers take longer than --request-timeout is not timed out")
    func heldRequestKeepsItsClock() throws {
        let state = ConnectionGuard(
            limits: .init(idleTimeout: .seconds(60), requestTimeout: .seconds(1)), metrics: ServiceMetrics(), logger: Logger(label: "test"))
        let channel = EmbeddedChannel()
        let pipeline = channel.pipeline.syncOperations
        try pipeline.addHandler(ConnectionGuard.ByteWatcher(state))
        try pipeline.configureHTTPServerPipeline(withPipeliningAssistance: false, withErrorHandling: false)
        try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
        try pipeline.addHandler(ConnectionGuard.PartWatcher(state))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        func heads() throws -> Int {
            var n = 0
            while let part = try channel.readInbound(as: HTTPRequestPart.self) { if case .head = part { n += 1 } }
            return n
        }
        // Enough requests to reach the bound of unanswered ones, then one more in a later read.
        try channel.writeInbound(ByteBuffer(string: String(repeating: Self.healthz, count: ConnectionGuard.maxUnanswered)))
        #expect(try heads() == ConnectionGuard.maxUnanswered)
        try channel.writeInbound(ByteBuffer(string: Self.healthz))
        channel.pipeline.fireChannelReadComplete()  // as the socket does after each read
        #expect(try heads() == 0, "held: answers are owed")
        // The server takes 5 s over the answers owed: the held request waited on it, not on the client.
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        #expect(try channel.readOutbound(as: ByteBuffer.self) == nil, "no 408 for a request that had fully arrived")
        #expect(channel.isActive)
        for _ in 0..<ConnectionGuard.maxUnanswered {
            try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .ok, headerFields: [.contentLength: "0"])))
            try channel.writeOutbound(HTTPResponsePart.end(nil))
        }
        channel.embeddedEventLoop.run()
        #expect(try heads() == 1, "the held request goes on once answers went out")
        #expect(channel.isActive)
        _ = try channel.finish(acceptAlreadyClosed: true)
    }
}

/// Counts the reads asked of the socket (first in the pipeline).
final class ReadCounter: ChannelOutboundHandler, Sendable {
    typealias OutboundIn = Any
    let count = Atomic<Int>(0)
    func read(context: ChannelHandlerContext) {
        count.add(1, ordering: .relaxed)
        context.read()
    }
}

/// A TCP client that writes requests and reads nothing until told to: its receive buffer is
/// small and it never asks its socket for bytes.
final class SlowReader: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let received = Atomic<Int>(0)
    let channel = Mutex<(any Channel)?>(nil)

    static func connect(port: Int) async throws -> SlowReader {
        let reader = SlowReader()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.autoRead, value: false)
            .channelOption(.socketOption(.so_rcvbuf), value: 4096)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(reader) } }
            .connect(host: "127.0.0.1", port: port).get()
        reader.channel.withLock { $0 = channel }
        return reader
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        received.add(unwrapInboundIn(data).readableBytes, ordering: .relaxed)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) { context.close(promise: nil) }

    func send(_ text: String) {
        channel.withLock { $0 }?.writeAndFlush(ByteBuffer(string: text), promise: nil)
    }

    /// Starts reading; the bytes read until the server closes, or until `limit`.
    func readUntilClosed(within limit: Duration) async throws -> (bytes: Int, closed: Bool) {
        guard let channel = channel.withLock({ $0 }) else { throw TestFailure("not connected") }
        // A server that closes with our requests unread resets the connection: it may be
        // closed here already.
        if channel.isActive {
            try? await channel.setOption(.autoRead, value: true).get()
            channel.read()
        }
        let deadline = ContinuousClock.now + limit
        while channel.isActive, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        let closed = !channel.isActive
        if !closed { try? await channel.close() }
        return (received.load(ordering: .relaxed), closed)
    }

    /// The size of one whole answer to `GET path`, read on a connection of its own.
    static func answerSize(port: Int, _ path: String) async throws -> Int? {
        var size: Int?
        try await RawConnection.session(port: port) { connection in
            try await connection.send("GET \(path) HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n")
            size = try await connection.readAnswer(within: .seconds(30)).raw.utf8.count
        }
        return size
    }
}
