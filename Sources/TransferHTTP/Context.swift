import Hummingbird
import Logging
import NIOCore
import Synchronization

/// What every request of ours carries besides the request itself.
public protocol AppRequestContext: RequestContext {
    /// The socket peer's address, when there is a socket.
    var peerAddress: String? { get }
    /// Filled in by handlers for the request log.
    var log: RequestLogFields { get }
    /// Who the route's `Authenticator` let in; nil on routes anyone may call.
    var identity: Identity? { get set }
    /// The client's connection, when it was open as the request arrived (a real socket).
    var connection: (any Channel)? { get }
}

extension AppRequestContext {
    /// Whether the client went away before its answer: the connection that was open when the
    /// request arrived is closed now (it hung up, reset, or the connection guard stopped it).
    /// `Channel.isActive` is safe to read from any thread.
    var clientWentAway: Bool { connection.map { !$0.isActive } ?? false }
}

/// Fields a handler learns (the account) that the request log prints once the response is made.
public final class RequestLogFields: Sendable {
    private let account = Mutex<String?>(nil)
    public init() {}
    public var accountID: String? {
        get { account.withLock { $0 } }
        set { account.withLock { $0 = newValue } }
    }
}

public struct TransferRequestContext: AppRequestContext, RequestContext {
    public var coreContext: CoreRequestContextStorage
    public let peerAddress: String?
    public let log = RequestLogFields()
    public var identity: Identity?
    public let connection: (any Channel)?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peerAddress = source.channel.remoteAddress?.ipAddress
        // Router tests run without a socket, on a channel that is never active.
        connection = source.channel.isActive ? source.channel : nil
    }

    /// Bodies are read with their route's own limit (`JSONBody`): 16 KiB, or 64 KiB on the
    /// service API, which passes its own. This default holds for anything else.
    public var maxUploadSize: Int { JSONBody.maxBytes }
}

extension Duration {
    var secondsDouble: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}
