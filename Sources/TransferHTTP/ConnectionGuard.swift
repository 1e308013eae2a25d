import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import TransferCore

/// `--idle-timeout` and `--request-timeout`.
public struct ConnectionLimits: Sendable {
    /// A connection that makes no progress this long is closed: it sends nothing, and reads
    /// none of the answers written to it, unless the server is still working on one.
    public var idleTimeout: Duration
    /// A request whose head and body have not fully arrived this long after its first byte
    /// is answered `408` and its connection closed.
    public var requestTimeout: Duration

    public init(idleTimeout: Duration, requestTimeout: Duration) {
        self.idleTimeout = idleTimeout
        self.requestTimeout = requestTimeout
    }
}

/// Why the connection guard stopped a request. A handler reading the request's body gets it
/// as the error the body throws, so it stops there and `ErrorMiddleware` logs and counts
/// the status the client was given (or, when it has gone, 499).
enum ConnectionVerdict: Error, Equatable {
    /// The head and body had not arrived within `--request-timeout` of the first byte, or
    /// nothing came for `--idle-timeout` in the middle of the request (said in the message).
    case requestTimeout(String)
    /// The bytes are not HTTP/1.1: a bad chunk size, a bad request line, an invalid header…
    case malformed(String)
    /// The client went away before its answer: its connection closed or broke, or it ended
    /// its side (EOF) in the middle of the request.
    case clientGone(requestCutShort: Bool)

    /// What the client is told, when it can be told anything.
    var answer: APIError? {
        switch self {
        case .requestTimeout(let message):
            APIError(.requestTimeout, "request_timeout", message)
        case .malformed(let message):
            .invalidRequest(message)
        case .clientGone(requestCutShort: true):
            // For a client that only half-closed its side and still reads.
            .invalidRequest("The request ended before it was complete.")
        case .clientGone(requestCutShort: false):
            nil
        }
    }

    /// The status logged and counted.
    var status: Int {
        switch self {
        case .clientGone: Int(HTTPResponse.Status.clientClosedRequest.code)
        default: Int(answer?.status.code ?? 500)
        }
    }

    /// What the router returns for a request the guard stopped. It is never sent (the guard
    /// has answered, or there is nobody to answer); it carries the status for the log.
    var response: Response {
        if case .clientGone = self { return Response(status: .clientClosedRequest) }
        guard let answer else { return Response(status: .internalServerError) }
        let (head, body) = answer.parts
        return Response(status: head.status, headers: head.headerFields, body: .init(byteBuffer: body))
    }

    /// The verdict on an error that reached the pipeline while reading a request.
    /// An EOF in the middle of a message (NIO's `invalidEOFState`, raised when the peer ends
    /// its side or the connection drops before the request is complete) and any socket error
    /// mean the client is gone; every other error is a request that is not HTTP.
    init(_ error: any Error) {
        switch error {
        case HTTPParserError.invalidEOFState:
            self = .clientGone(requestCutShort: true)
        case is IOError, is ChannelError:
            self = .clientGone(requestCutShort: false)
        case HTTPParserError.invalidChunkSize:
            self = .malformed("The request's chunked body is malformed: a chunk size is not valid.")
        case HTTPParserError.invalidContentLength, HTTPParserError.unexpectedContentLength:
            self = .malformed("The request's Content-Length is not valid.")
        case HTTPParserError.headerOverflow:
            self = .malformed("The request's head is too large.")
        default:
            self = .malformed("The request is not valid HTTP/1.1.")
        }
    }
}

extension HTTPResponse.Status {
    /// nginx's "client closed request": the client went away before its answer.
    static let clientClosedRequest = HTTPResponse.Status(code: 499, reasonPhrase: "Client Closed Request")
}

/// Hummingbird's HTTP/1.1 channel with a connection guard around its HTTP codec.
///
/// Hummingbird 2.28.1's own `idleTimeout` (its `HTTPConnectionStateHandler`) counts decoded
/// HTTP parts as activity, so a client trickling a request head byte by byte looks idle
/// while it sends; it rightly leaves alone a connection whose whole request has arrived and
/// waits for its answer. It has no request timeout, and its pipeline (NIO's decoder with
/// `withErrorHandling: false`) lets parser errors reach the request's body stream (a 500) or
/// its own loop, which writes an empty 400. The guard replaces all three.
struct GuardedHTTP1Channel: ServerChildChannel, HTTPChannelHandler {
    typealias Value = HTTP1Channel.Value

    let responder: HTTPChannelHandler.Responder
    let limits: ConnectionLimits
    let metrics: ServiceMetrics

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        let state = ConnectionGuard(limits: limits, metrics: metrics, logger: logger)
        let parts = NIOLoopBound(ConnectionGuard.PartWatcher(state), eventLoop: channel.eventLoop)
        do {
            // First in the pipeline: it sees raw bytes, before the HTTP decoder.
            try channel.pipeline.syncOperations.addHandler(ConnectionGuard.ByteWatcher(state), position: .first)
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        // Right after the HTTP codec (Hummingbird's "additional handlers"), before the router.
        return HTTP1Channel(responder: responder, configuration: .init(additionalChannelHandlers: [parts.value]))
            .setup(channel: channel, logger: logger)
    }

    func handle(value: Value, logger: Logger) async {
        await handleHTTP(asyncChannel: value, logger: logger)
    }
}

/// One connection's timers and the requests on it, on its event loop. Two handlers share it:
/// `ByteWatcher` before the HTTP decoder (a request's first byte starts its clock, any byte is
/// activity) and `PartWatcher` after it (a request's head and end, the answer going out,
/// errors from the decoder or the socket).
final class ConnectionGuard {
    /// Requests decoded ahead of their answers: past this, the bytes read stay whole in
    /// `held` and the socket is asked for no more until answers go out. Every request decoded
    /// is answered, and Hummingbird writes an answer whether or not the client reads, so a
    /// client that pipelines and never reads holds this many answers (and those of the slice
    /// that crossed the bound) beyond the socket's buffers: two keep a pipelining client busy
    /// and bound what one holds to a few hundred KiB even for the largest answers
    /// (`/openapi.yaml`, 104 KiB; see BENCHMARKS.md).
    static let maxUnanswered = 2
    /// The socket's send buffer (Linux keeps twice this): without it the kernel grows it to
    /// 4 MiB, which a client that never reads fills with about 37 answers of `/openapi.yaml`.
    /// 128 KiB still carries the largest answer (push targets, about 225 KB) in two round trips.
    static let sendBufferBytes: SocketOptionValue = 128 * 1024
    /// The bytes handed to the HTTP decoder at once while no answer is owed: a body arrives
    /// in few slices.
    static let sliceBytes = 1024
    /// The slice while answers are owed (the client pipelines): the shortest request is 18
    /// bytes, so a slice that crosses the bound carries at most one more request.
    static let owedSliceBytes = 32

    /// The request being received: from its first byte until its end is decoded.
    struct Receiving {
        var firstByte: NIODeadline
        /// Set when its head is decoded and handed to the router.
        var method: String?
    }

    let limits: ConnectionLimits
    let metrics: ServiceMetrics
    let logger: Logger

    var receiving: Receiving?
    /// Heads handed to the router, answers started and answers finished on this connection.
    var delivered = 0, answersStarted = 0, answersEnded = 0
    /// The last byte from the client, or the end of the last answer.
    var lastActivity = NIODeadline.now()
    /// Set once the guard answers or closes: from then on it drops what the client sends and
    /// what the router writes, and swallows further errors.
    var closing = false
    var requestTimer: Scheduled<Void>?
    var idleTimer: Scheduled<Void>?
    /// `PartWatcher`'s place in the pipeline: the guard's answers are HTTP parts written from
    /// there (through the HTTP encoder), and its verdicts go from there to the router.
    var context: ChannelHandlerContext?
    /// `ByteWatcher`'s place: held bytes and reads go on from there.
    var byteContext: ChannelHandlerContext?
    /// Bytes read from the socket and not yet handed to the decoder (the bound was reached).
    var held: ByteBuffer?
    /// A read asked of the socket while reading is held, and the client's end (EOF) that came
    /// after held bytes: each goes on once the held bytes have.
    var readPending = false, inputClosedPending = false
    /// A resumption is scheduled (answers went out; held bytes and reads may go on).
    var resumeScheduled = false
    /// A verdict on a pipelined request whose earlier requests were still being answered: it
    /// is answered once they are (answers go out in order), then the connection closes.
    var deferred: (verdict: ConnectionVerdict, handedOver: Bool)?
    /// How long a deferred verdict waits for the answers before it (far longer than any
    /// request of this service takes: each answers 503 within seconds when it cannot finish).
    static let deferredAnswerLimit = TimeAmount.seconds(60)

    init(limits: ConnectionLimits, metrics: ServiceMetrics, logger: Logger) {
        self.limits = limits
        self.metrics = metrics
        self.logger = logger
    }

    /// Answers the router owes: requests handed over and not yet answered.
    var owed: Int { delivered - answersEnded }

    /// Whether the decoder gets no more bytes for now: enough requests wait for their
    /// answers, or answers wait for the client to read them.
    var readingHeld: Bool {
        owed >= Self.maxUnanswered || !(byteContext?.channel.isWritable ?? true)
    }

    /// Hands `buffer` to the decoder a slice at a time while reading is not held; what is
    /// left waits in `held`.
    func forward(_ buffer: ByteBuffer) {
        guard let byteContext else { return }
        var buffer = buffer
        while buffer.readableBytes > 0 {
            if closing { return }
            if readingHeld {
                held = buffer
                return
            }
            let slice = buffer.readSlice(length: min(owed > 0 ? Self.owedSliceBytes : Self.sliceBytes, buffer.readableBytes))!
            byteContext.fireChannelRead(NIOAny(slice))
        }
        held = nil
    }

    /// After answers went out or the channel became writable: held bytes go to the decoder,
    /// then a pending read and a pending EOF go on. Run on its own event-loop turn, not from
    /// inside the router's write.
    func scheduleResume() {
        guard !resumeScheduled, !closing, held != nil || readPending, let byteContext else { return }
        resumeScheduled = true
        byteContext.eventLoop.assumeIsolated().execute {
            self.resumeScheduled = false
            self.resume()
        }
    }

    func resume() {
        guard !closing, let byteContext, !readingHeld else { return }
        if let buffer = held {
            held = nil
            restartClock(carrying: buffer)
            forward(buffer)
            byteContext.fireChannelReadComplete()
            armRequestTimer()
            if held != nil { return }
        }
        if inputClosedPending {
            inputClosedPending = false
            byteContext.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        }
        if readPending, !closing {
            readPending = false
            byteContext.read()
        }
    }

    func bytesArrived(_ buffer: ByteBuffer) {
        lastActivity = .now()
        // A request starts with its first byte; blank lines between requests (which the
        // parser skips) start nothing. Bytes the guard holds start nothing yet: the request
        // waits on the server's answers, not on the client (`restartClock`).
        if receiving == nil, held == nil, !readingHeld, Self.startsRequest(buffer) {
            startRequest()
        }
    }

    static func startsRequest(_ buffer: ByteBuffer) -> Bool {
        buffer.readableBytesView.contains { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }
    }

    /// Held bytes go to the decoder: the request they carry (or finish) gets its
    /// `--request-timeout` from now, however long the server took with the answers before it.
    func restartClock(carrying buffer: ByteBuffer) {
        requestTimer?.cancel()
        requestTimer = nil
        if receiving != nil {
            receiving?.firstByte = .now()
        } else if Self.startsRequest(buffer) {
            startRequest()
        }
    }

    func startRequest() {
        receiving = Receiving(firstByte: .now())
    }

    /// After each read, once the decoder has seen its bytes: a request still incomplete gets
    /// its timer, due `--request-timeout` after its first byte. (A request that arrives in one
    /// read, the common case, never schedules one.)
    func armRequestTimer() {
        guard let receiving, requestTimer == nil, !closing else { return }
        requestTimer = context?.eventLoop.assumeIsolated().scheduleTask(deadline: receiving.firstByte + .init(limits.requestTimeout)) {
            self.requestTimer = nil
            // Bytes the guard holds wait on the server: their clock restarts when they go on.
            guard !self.closing, self.receiving != nil, self.held == nil else { return }
            self.stop(.requestTimeout("The request did not fully arrive within \(self.limits.requestTimeout.flagText) of its first byte."))
        }
    }

    func headArrived(_ head: HTTPRequest) {
        // The bytes of a pipelined request may have come with the end of the one before; its
        // clock then starts with its head.
        if receiving == nil { startRequest() }
        receiving?.method = head.method.rawValue
        delivered += 1
    }

    func requestEnded() {
        receiving = nil
        requestTimer?.cancel()
        requestTimer = nil
    }

    func answerWritten(_ part: HTTPResponsePart) {
        switch part {
        case .head(let head) where head.status.kind != .informational: answersStarted += 1
        case .end:
            answersEnded += 1
            lastActivity = .now()
            if deferred != nil { return }
            scheduleIdleCheck()
            scheduleResume()
        default: break
        }
    }

    /// Closes the connection once it has made no progress for `--idle-timeout`: the client
    /// sent nothing, and read none of the answers written to it (the channel stayed
    /// unwritable). A connection whose whole request arrived and whose answer the server is
    /// still working on (the channel writable) is kept, and looked at again later.
    func scheduleIdleCheck(notBefore: NIODeadline? = nil) {
        guard idleTimer == nil, !closing else { return }
        let due = max(lastActivity + .init(limits.idleTimeout), notBefore ?? lastActivity)
        idleTimer = context?.eventLoop.assumeIsolated().scheduleTask(deadline: due) {
            self.idleTimer = nil
            guard !self.closing else { return }
            let now = NIODeadline.now()
            if now < self.lastActivity + .init(self.limits.idleTimeout) {
                self.scheduleIdleCheck()
            } else if self.receiving == nil, self.owed > 0, self.context?.channel.isWritable ?? false {
                // The server is working on an answer: not the client's silence.
                self.scheduleIdleCheck(notBefore: now + .init(self.limits.idleTimeout))
            } else if self.receiving != nil {
                // Idle in the middle of a request (an --idle-timeout shorter than --request-timeout).
                self.stop(.requestTimeout("Nothing of the request arrived for \(self.limits.idleTimeout.flagText)."))
            } else {
                self.logger.debug(self.owed > 0 ? "connection closed: its answers are not read" : "idle connection closed")
                self.stop(.clientGone(requestCutShort: false), log: false)
            }
        }
    }

    /// The client ended its side (EOF). Between requests Hummingbird closes the connection
    /// itself; in the middle of one the decoder has reported it already. A client whose whole
    /// request arrived and which hangs up while it waits for the answer has gone away (as
    /// nginx and Go's server read it): the connection is closed, the handler finishes its
    /// work, and its answer, which nobody would read, is logged and counted 499.
    func inputClosed() {
        if closing {
            context?.close(promise: nil)
        } else if receiving == nil, owed > 0 {
            stop(.clientGone(requestCutShort: false), log: false)
        }
    }

    /// Stops the connection for `verdict`: tells the router's handler (when it is reading this
    /// request), answers when an answer can still go out in order, and closes.
    func stop(_ verdict: ConnectionVerdict, log: Bool = true) {
        guard let context else { return }
        closing = true
        cancelTimers()
        let current = receiving
        receiving = nil
        let handedOver = current?.method != nil
        if handedOver { context.fireErrorCaught(verdict) }
        // Answer only when nothing is half written and every earlier request has its answer.
        let inOrder = answersStarted == answersEnded && owed == (handedOver ? 1 : 0)
        if let current, !handedOver, log {
            // The router never saw this request: the guard logs and counts it.
            RequestLog.record(
                metrics: metrics, logger: logger, method: "-", route: "unmatched", status: verdict.status,
                duration: .nanoseconds((NIODeadline.now() - current.firstByte).nanoseconds), account: nil)
        }
        if verdict.answer != nil, !inOrder, owed > (handedOver ? 1 : 0), context.channel.isActive {
            // Earlier requests of this connection are still being answered (a slow handler, a
            // busy machine): this answer waits for theirs, as HTTP/1.1 orders them. Should
            // they not come within `deferredAnswerLimit`, the connection closes.
            deferred = (verdict, handedOver)
            context.eventLoop.assumeIsolated().scheduleTask(in: Self.deferredAnswerLimit) { [weak self] in
                guard let self, self.deferred != nil else { return }
                self.deferred = nil
                self.context?.close(promise: nil)
            }
            return
        }
        guard inOrder else {
            context.close(promise: nil)
            return
        }
        answer(verdict)
    }

    /// After an answer's end went out: a deferred verdict whose turn has come is answered.
    func answerDeferredIfDue() {
        guard let deferred, answersStarted == answersEnded, owed == (deferred.handedOver ? 1 : 0) else { return }
        self.deferred = nil
        answer(deferred.verdict)
    }

    /// Writes `verdict`'s answer (if it has one) and closes the connection after it.
    func answer(_ verdict: ConnectionVerdict) {
        guard let context, let answer = verdict.answer, context.channel.isActive else {
            context?.close(promise: nil)
            return
        }
        let (answerHead, body) = answer.parts
        var head = answerHead
        head.headerFields[.connection] = "close"
        head.headerFields[.contentLength] = String(body.readableBytes)
        context.write(NIOAny(HTTPResponsePart.head(head)), promise: nil)
        context.write(NIOAny(HTTPResponsePart.body(body)), promise: nil)
        // A lingering close: end our side, then drop what the client still sends for a moment
        // before closing, so the answer is not lost to a reset while its request is in flight.
        context.writeAndFlush(NIOAny(HTTPResponsePart.end(nil))).assumeIsolated().whenComplete { _ in
            context.close(mode: .output, promise: nil)
            context.eventLoop.assumeIsolated().scheduleTask(in: .seconds(2)) { context.close(promise: nil) }
        }
    }

    func cancelTimers() {
        requestTimer?.cancel()
        idleTimer?.cancel()
        requestTimer = nil
        idleTimer = nil
    }

    /// Before the HTTP decoder: raw bytes, and the reads asked of the socket.
    final class ByteWatcher: ChannelDuplexHandler, RemovableChannelHandler {
        typealias InboundIn = ByteBuffer
        typealias InboundOut = ByteBuffer
        typealias OutboundIn = ByteBuffer
        typealias OutboundOut = ByteBuffer
        let state: ConnectionGuard
        init(_ state: ConnectionGuard) { self.state = state }

        func handlerAdded(context: ChannelHandlerContext) {
            state.byteContext = context
            try? context.channel.syncOptions?.setOption(.socketOption(.so_sndbuf), value: ConnectionGuard.sendBufferBytes)
        }

        func channelActive(context: ChannelHandlerContext) {
            state.lastActivity = .now()
            state.scheduleIdleCheck()
            context.fireChannelActive()
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if state.closing { return }  // lingering: dropped
            var buffer = unwrapInboundIn(data)
            state.bytesArrived(buffer)
            if state.held != nil {
                state.held!.writeBuffer(&buffer)
            } else {
                state.forward(buffer)
            }
        }

        /// The socket is asked for more only while the decoder takes bytes.
        func read(context: ChannelHandlerContext) {
            if state.held != nil || state.readingHeld {
                state.readPending = true
            } else {
                context.read()
            }
        }

        /// The client read some answers (the channel drained below its low water mark).
        func channelWritabilityChanged(context: ChannelHandlerContext) {
            if context.channel.isWritable {
                state.lastActivity = .now()
                state.scheduleResume()
            }
            context.fireChannelWritabilityChanged()
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            // The client's end comes after the bytes it sent before it.
            if state.held != nil, case .inputClosed? = event as? ChannelEvent {
                state.inputClosedPending = true
                return
            }
            context.fireUserInboundEventTriggered(event)
        }

        func channelReadComplete(context: ChannelHandlerContext) {
            state.armRequestTimer()
            context.fireChannelReadComplete()
        }

        func channelInactive(context: ChannelHandlerContext) {
            state.cancelTimers()
            state.held = nil
            context.fireChannelInactive()
        }

        func handlerRemoved(context: ChannelHandlerContext) {
            state.cancelTimers()
            state.byteContext = nil
        }
    }

    /// After the HTTP codec: request and response parts, and the pipeline's errors.
    final class PartWatcher: ChannelDuplexHandler, RemovableChannelHandler {
        typealias InboundIn = HTTPRequestPart
        typealias InboundOut = HTTPRequestPart
        typealias OutboundIn = HTTPResponsePart
        typealias OutboundOut = HTTPResponsePart
        let state: ConnectionGuard
        init(_ state: ConnectionGuard) { self.state = state }

        func handlerAdded(context: ChannelHandlerContext) {
            state.context = context
            if context.channel.isActive { state.scheduleIdleCheck() }
        }

        func handlerRemoved(context: ChannelHandlerContext) {
            state.cancelTimers()
            state.context = nil
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            if state.closing { return }
            switch unwrapInboundIn(data) {
            case .head(let head): state.headArrived(head)
            case .body: break
            case .end: state.requestEnded()
            }
            context.fireChannelRead(data)
        }

        func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
            if state.closing && state.deferred == nil {
                // The guard answered (or nobody is left to answer): the router's answer goes nowhere.
                promise?.succeed(())
                return
            }
            let part = unwrapOutboundIn(data)
            state.answerWritten(part)
            context.write(data, promise: promise)
            if case .end = part { state.answerDeferredIfDue() }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            if state.closing { return }
            state.stop(ConnectionVerdict(error))
        }

        func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
            if case .inputClosed? = event as? ChannelEvent { state.inputClosed() }
            context.fireUserInboundEventTriggered(event)
        }
    }
}

@available(*, unavailable)
extension ConnectionGuard: Sendable {}
