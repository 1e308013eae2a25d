import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP request as TransferKit sends it.
struct HTTPRequest: Sendable {
    var method: String
    var url: URL
    var headers: [String: String] = [:]
    var body: Data?
}

/// One HTTP response; header names are lower-cased.
struct HTTPResponse: Sendable {
    var status: Int
    var headers: [String: String] = [:]
    var body: Data = Data()

    var isSuccess: Bool { (200..<300).contains(status) }

    /// The response when it is 2xx; otherwise throws the service's error.
    func succeeded() throws -> HTTPResponse {
        guard isSuccess else { throw TransferError(response: self) }
        return self
    }
}

/// The one thing TransferKit needs from the network. Production uses ``Transport``;
/// the unit tests use an in-process fake server.
protocol HTTPTransport: Sendable {
    func send(_ request: HTTPRequest) async throws -> HTTPResponse
}

extension HTTPTransport {
    /// Sends one request to `endpoint` under `baseURL`: a JSON body when there is one, the bearer
    /// token when given, and the device's secret beside it when given. A request that does not reach the service throws ``TransferError/Code/network``;
    /// any answer is returned as is.
    func send(
        _ endpoint: Endpoint, baseURL: URL, path: [String: String] = [:], query: [String: String] = [:],
        body: Data? = nil, token: String? = nil, deviceSecret: String? = nil
    ) async throws -> HTTPResponse {
        var request = HTTPRequest(method: endpoint.method, url: endpoint.url(baseURL: baseURL, path: path, query: query))
        request.headers["Accept"] = "application/json"
        if let body {
            request.body = body
            request.headers["Content-Type"] = "application/json"
        }
        if let token { request.headers["Authorization"] = "Bearer \(token)" }
        if let deviceSecret { request.headers["X-Device-Secret"] = deviceSecret }
        do {
            return try await send(request)
        } catch let error as CancellationError {
            throw error
        } catch let error as URLError where error.code == .cancelled {
            // URLSession's answer to a cancelled task (a SwiftUI `.task` that went away): not a
            // network failure, and apps already ignore CancellationError.
            throw CancellationError()
        } catch where Task.isCancelled {
            throw CancellationError()
        } catch {
            throw TransferError(network: error)
        }
    }
}

extension HTTPTransport {
    /// Ends a session at the service (`POST /v1/logout`) with its tokens. When the access token
    /// has expired (`401 invalid_token`), the refresh token is exchanged for a new one first, used for the
    /// logout only and never kept. Every failure is ignored: a refused refresh token means the
    /// service already ended the session, and the caller has forgotten the tokens anyway.
    func logOut(_ tokens: StoredSession, baseURL: URL) async {
        let response = try? await send(.logout, baseURL: baseURL, token: tokens.accessToken)
        guard response?.status == 401, let session = try? await refresh(tokens.refreshToken, baseURL: baseURL) else { return }
        _ = try? await send(.logout, baseURL: baseURL, token: session.accessToken)
    }

    /// `POST /v1/tokens/refresh`: the renewed session, or the service's refusal as a ``TransferError``.
    func refresh(_ refreshToken: String, baseURL: URL) async throws -> SessionBody {
        let response = try await send(.refresh, baseURL: baseURL, body: Wire.encode(RefreshRequest(refreshToken: refreshToken)))
        return try Wire.decode(SessionBody.self, from: response.succeeded())
    }
}

/// How TransferKit's requests reach the service: one function from a `URLRequest` to the
/// answer. ``urlSession(_:headers:)`` is the default; give your own to route requests through
/// another HTTP stack, to add headers, or to answer them in tests and SwiftUI previews.
///
/// ```swift
/// let transport = Transport { request in
///     var request = request
///     request.setValue("ios/4.2", forHTTPHeaderField: "X-App-Version")
///     let (data, response) = try await session.data(for: request)
///     return (data, response as! HTTPURLResponse)
/// }
/// ```
///
/// A thrown error that is not a `CancellationError` (or `URLError.cancelled`) becomes a
/// ``TransferError/Code/network`` error.
public struct Transport: Sendable {
    let perform: @Sendable (URLRequest) async throws -> (Data, HTTPURLResponse)

    /// Sends `request` through this transport (for ``TransferKitTesting``'s lossy network).
    @_spi(TransferKitTesting)
    public func answer(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        try await perform(request)
    }

    /// A transport that answers each request with `perform`.
    public init(_ perform: @escaping @Sendable (URLRequest) async throws -> (Data, HTTPURLResponse)) {
        self.perform = perform
    }

    /// Requests through `session`, each with `headers` added (e.g. your app's version).
    public static func urlSession(_ session: URLSession, headers: [String: String] = [:]) -> Transport {
        Transport { request in
            var request = request
            for (name, value) in headers where request.value(forHTTPHeaderField: name) == nil {
                request.setValue(value, forHTTPHeaderField: name)
            }
            let (data, response) = try await session.data(for: request)
            guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
            return (data, http)
        }
    }
}

extension Transport: HTTPTransport {
    func send(_ request: HTTPRequest) async throws -> HTTPResponse {
        var urlRequest = URLRequest(url: request.url)
        urlRequest.httpMethod = request.method
        urlRequest.httpBody = request.body
        urlRequest.cachePolicy = .reloadIgnoringLocalCacheData
        for (name, value) in request.headers {
            urlRequest.setValue(value, forHTTPHeaderField: name)
        }
        let (data, http) = try await perform(urlRequest)
        var headers: [String: String] = [:]
        for (name, value) in http.allHeaderFields {
            if let name = name as? String, let value = value as? String { headers[name.lowercased()] = value }
        }
        return HTTPResponse(status: http.statusCode, headers: headers, body: data)
    }
}

extension Transport {
    /// This transport, writing one line per request to `logger`: method, path, status and
    /// duration (never a header, body or token). Nil: this transport as is.
    public func logging(_ logger: (@Sendable (String) -> Void)?) -> Transport {
        guard let logger else { return self }
        let perform = self.perform
        return Transport { request in
            let started = Date()
            let line = "TransferKit: \(request.httpMethod ?? "GET") \(request.url?.path ?? "?")"
            func elapsed() -> Int { Int(Date().timeIntervalSince(started) * 1000) }
            do {
                let (data, response) = try await perform(request)
                logger("\(line) → \(response.statusCode) in \(elapsed()) ms")
                return (data, response)
            } catch {
                logger("\(line) → failed in \(elapsed()) ms: \(type(of: error))")
                throw error
            }
        }
    }
}
