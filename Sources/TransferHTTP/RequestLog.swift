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
            let duration = ContinuousClock.now - start
            let route = context.endpointPath ?? "unmatched"
            metrics.request(method: request.method.rawValue, route: route, status: status, duration: duration)
            var metadata: Logger.Metadata = [
                "method": "\(request.method.rawValue)", "route": "\(route)", "status": "\(status)",
                "duration_ms": "\((duration.secondsDouble * 1e5).rounded() / 100)",
            ]
            if let account = context.log.accountID { metadata["account"] = "\(account)" }
            context.logger.info("request", metadata: metadata)
        }
        let response = try await next(request, context)
        status = response.status.code
        return response
    }
}
