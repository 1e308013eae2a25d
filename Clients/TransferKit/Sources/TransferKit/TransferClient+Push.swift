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
    /// to `didRegisterForRemoteNotificationsWithDeviceToken`. Call it whenever iOS hands you one,
    /// even before ``launch()`` has finished.
    ///
    /// A token that arrives while the phone has no account yet (the first launch still running),
    /// or whose upload fails, is kept and uploaded after the next sign-in (launch, claim, new
    /// account). It is uploaded again after every claim, whose phone may have a new device id.
    ///
    /// - Parameter environment: the APNs gateway; nil follows the build: ``APNsEnvironment/sandbox``
    ///   when TransferKit is compiled for debugging (`DEBUG`), ``APNsEnvironment/production`` otherwise.
    ///   Set it when your signing says otherwise (the `aps-environment` entitlement).
    /// - Throws: only when there is an account and the upload failed (the token is still kept).
    public func registerPushToken(apns deviceToken: Data, environment: APNsEnvironment? = nil) async throws {
        try await register(PushTokenRequest(
            provider: PushProvider.apns.rawValue, token: Hex.encode(deviceToken),
            environment: (environment ?? .forThisBuild).rawValue))
    }

    /// Registers this phone's FCM registration token (`PUT /v1/devices/push-token`), as
    /// ``registerPushToken(apns:environment:)`` does: at any time, kept until it can be uploaded.
    public func registerPushToken(fcm token: String) async throws {
        try await register(PushTokenRequest(provider: PushProvider.fcm.rawValue, token: token))
    }

    private func register(_ token: PushTokenRequest) async throws {
        pushToken = token
        pushTokenDevice = nil
        guard (try? anyAccountOnDevice()) != nil else { return }  // uploaded after the sign-in
        try await uploadPushToken()
    }

    /// After a sign-in: uploads the registered token unless this device id already has it (a
    /// claim may have brought a new device id); a failure leaves it for the next sign-in.
    func uploadPendingPushToken() async {
        guard pushToken != nil, pushTokenDevice == nil || pushTokenDevice != identity?.deviceId else { return }
        try? await uploadPushToken()
    }

    private func uploadPushToken() async throws {
        guard let token = pushToken else { return }
        let device = identity?.deviceId
        _ = try await request(.registerPushToken, as: anyAccountOnDevice(), body: token)
        if pushToken?.token == token.token && pushToken?.provider == token.provider { pushTokenDevice = device }
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
    public func setPushEnabled(_ enabled: Bool, of accountId: String? = nil) async throws {
        _ = try await request(.setAccountPush, as: accountId, body: AccountPushRequest(enabled: enabled))
    }

    /// The local account a notification is for, from the ``notificationAccountKey`` of its payload
    /// (`userInfo` of a `UNNotification`'s request content, or an FCM message's data); nil when the
    /// payload names none or an account that is not on this phone (ignore such a push).
    ///
    /// Works at a cold start too (a push tapped while the app was not running): before the state
    /// is read it looks at the stored account list.
    public nonisolated func account(forNotification userInfo: [AnyHashable: Any]) -> Account? {
        guard let id = userInfo[Self.notificationAccountKey] as? String else { return nil }
        return knownAccounts.first { $0.id == id.lowercased() }
    }

    /// The accounts as published, or before anything was published, as stored: only a list of
    /// this phone's identity (a list restored from another phone's backup names that phone's
    /// accounts, which this one does not hold).
    nonisolated var knownAccounts: [Account] {
        if hub.hasState { return hub.state.accounts }
        guard let list = (try? accountListStore.read(StoredAccountList.self, StoreKey.accountList)) ?? nil,
            let identity = (try? credentials.read(DeviceIdentity.self, StoreKey.identity)) ?? nil,
            list.deviceId == identity.deviceId
        else { return [] }
        return list.accounts
    }
}
