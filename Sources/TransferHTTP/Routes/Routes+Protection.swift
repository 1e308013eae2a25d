import Hummingbird
import TransferCore

// Inactive accounts (contract v1.2): the app backend protects an account that holds something
// of value (a purchase), and the pruner never erases it as inactive.
extension API {
    static var protectionRoutes: [Route] {
        [Route(.put, "/v1/service/accounts/:accountId/protection", .serviceKey) { $0.setProtection }]
    }

    /// `{"protected": true | false}` → `204`; `404 account_not_found` for an account that does not exist or was deleted.
    func setProtection(_ request: Request, _ context: Context) async throws -> Response {
        let account = try Self.accountID(context.parameters.get("accountId") ?? "", field: "accountId")
        let body = try await JSONBody.read(request, context: context, limit: JSONBody.serviceMaxBytes)
        try await service.setProtection(accountID: account, protected: try body.bool("protected"))
        return Response(status: .noContent)
    }
}
