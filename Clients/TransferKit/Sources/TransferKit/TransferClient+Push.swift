import Foundation

extension TransferClient {
    /// The key of the push payload that names the account a notification is for: `accountId`.
    ///
    /// Your app backend asks the service which tokens reach which accounts
    /// (`POST /v1/service/push-targets`, each target lists the `accountIds` it reaches) and puts
    /// the account's id at the top level of the payload, beside `aps` (APNs) or in `data` (FCM):
    ///
    /// ```json
    /// {"aps": {"alert": "You have a new message"}, "accountId": "01936f2e-8b1a-7c3d-9e4f-5a6b7c8d9e0f"}
    /// ```
    public static let notificationAccountKey = "accountId"

    /// Registers this phone's APNs token (`PUT /v1/devices/push-token`); the token as iOS hands it
    /// to `didRegisterForRemoteNotificationsWithDeviceToken`.
    ///
    /// A phone has one token per provider. Register it again after a claim: the claiming phone
    /// may have a new device id.
    public func registerPushToken(apns deviceToken: Data, environment: APNsEnvironment = .production) async throws {
        _ = try await request(
            .registerPushToken, as: anyAccountOnDevice(),
            body: PushTokenRequest(
                provider: PushProvider.apns.rawValue, token: Hex.encode(deviceToken), environment: environment.rawValue))
    }

    /// Registers this phone's FCM registration token (`PUT /v1/devices/push-token`).
    public func registerPushToken(fcm token: String) async throws {
        _ = try await request(
            .registerPushToken, as: anyAccountOnDevice(),
            body: PushTokenRequest(provider: PushProvider.fcm.rawValue, token: token))
    }

    /// Removes this phone's token for the provider (`DELETE /v1/devices/push-token`).
    public func removePushToken(provider: PushProvider) async throws {
        _ = try await request(.removePushToken, as: anyAccountOnDevice(), query: ["provider": provider.rawValue])
    }

    /// Which of the phone's accounts its tokens reach (`PUT /v1/devices/push-preferences`).
    public func setPushMode(_ mode: PushMode) async throws {
        _ = try await request(
            .setPushPreferences, as: anyAccountOnDevice(), body: PushPreferencesRequest(mode: mode.rawValue))
    }

    /// Mutes or unmutes the account (the current one when nil) on this phone (`PUT /v1/me/push`).
    public func setPushEnabled(_ enabled: Bool, for accountId: String? = nil) async throws {
        _ = try await request(.setAccountPush, as: accountId, body: AccountPushRequest(enabled: enabled))
    }

    /// The local account a notification is for, from the ``notificationAccountKey`` of its payload
    /// (`userInfo` of a `UNNotification`'s request content, or an FCM message's data); nil when the
    /// payload names none or an account that is not on this phone (ignore such a push).
    public nonisolated func account(forNotification userInfo: [AnyHashable: Any]) -> Account? {
        guard let id = userInfo[Self.notificationAccountKey] as? String else { return nil }
        return hub.state.accounts.first { $0.id == id.lowercased() }
    }
}
