import Hummingbird
import Logging

/// One structured log line and the metrics per request: method, route, status, duration and
/// the account when known. Never the body, query, headers or tokens.
struct RequestLogMiddleware<Context: AppRequestContext>: RouterMiddleware {
    let metrics: ServiceMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        var status = 500
        defer {
            RequestLog.record(
                metrics: metrics, logger: context.logger, method: request.method.rawValue, route: context.endpointPath ?? "unmatched",
                status: status, duration: ContinuousClock.now - start, account: context.log.accountID)
        }
        do {
            let response = try await next(request, context)
            status = response.status.code
            return response
        } catch {
            // Nothing escapes ErrorMiddleware but cancellation; a client that has gone is still 499.
            if context.clientWentAway { status = 499 }
            throw error
        }
    }
}

enum RequestLog {
    /// Logs and counts one request; the connection guard calls it too, for requests the
    /// router never saw (`method` "-", route "unmatched").
    static func record(
        metrics: ServiceMetrics, logger: Logger, method: String, route: String, status: Int, duration: Duration, account: String?
    ) {
        metrics.request(method: method, route: route, status: status, duration: duration)
        var metadata: Logger.Metadata = [
            "method": "\(method)", "route": "\(route)", "status": "\(status)",
            "duration_ms": "\((duration.secondsDouble * 1e5).rounded() / 100)",
        ]
        if let account { metadata["account"] = "\(account)" }
        logger.info("request", metadata: metadata)
    }
}
