// Push routing: a push token belongs to a device, and accounts reach it through the device.

public enum PushProvider: String, Sendable, Codable, CaseIterable {
    case apns, fcm
}

/// APNs' two gateways; FCM has none.
public enum PushEnvironment: String, Sendable, Codable, CaseIterable {
    case production, sandbox
}

/// Which of a device's accounts its push tokens reach.
public enum PushMode: String, Sendable, Codable, CaseIterable {
    /// Every account on the device that has its pushes on (the default).
    case all
    /// Only the device's current account, if its pushes are on.
    case current
}

/// A device's token for one provider. A device has at most one per provider, and a token (of
/// a provider) is on one device at most.
public struct PushToken: Sendable, Equatable {
    public var deviceID: String
    public var provider: PushProvider
    /// As registered (APNs tokens lower-cased).
    public var token: String
    /// APNs only.
    public var environment: PushEnvironment?
    /// Feedback about the token from before this time is ignored: the device registered it again.
    public var registeredAt: Timestamp

    public init(deviceID: String, provider: PushProvider, token: String, environment: PushEnvironment?, registeredAt: Timestamp) {
        self.deviceID = deviceID
        self.provider = provider
        self.token = token
        self.environment = environment
        self.registeredAt = registeredAt
    }

    /// What the token is unique and looked up by: FCM tokens may be 4 096 characters, longer
    /// than an index entry may be.
    public var tokenHash: SecretHash { SecretHash(of: token) }

    /// The token's last 8 characters, enough for support to match it with an app's log; of a
    /// short token (FCM allows one character) a quarter at most, never the token.
    public var ending: String { String(token.suffix(min(8, token.count / 4))) }
}

/// One row of the routing: `accountID` reaches the device's token for `provider`.
/// The device a push token is registered on, and the accounts active there.
public struct PushTokenHolder: Sendable, Equatable {
    public var deviceID: String
    public var accountIDs: [String]
    public init(deviceID: String, accountIDs: [String]) {
        self.deviceID = deviceID
        self.accountIDs = accountIDs
    }
}

public struct PushRoute: Sendable, Equatable {
    public var provider: PushProvider
    public var token: String
    public var environment: PushEnvironment?
    public var deviceID: String
    public var accountID: String

    public init(provider: PushProvider, token: String, environment: PushEnvironment?, deviceID: String, accountID: String) {
        self.provider = provider
        self.token = token
        self.environment = environment
        self.deviceID = deviceID
        self.accountID = accountID
    }
}

/// One token to send to, and which of the asked accounts it reaches: a segment push reaches a
/// device once, and the app knows which of its accounts it is for.
public struct PushTarget: Sendable, Equatable {
    public var provider: PushProvider
    public var token: String
    public var environment: PushEnvironment?
    public var deviceID: String
    public var accountIDs: [String]

    public init(provider: PushProvider, token: String, environment: PushEnvironment?, deviceID: String, accountIDs: [String]) {
        self.provider = provider
        self.token = token
        self.environment = environment
        self.deviceID = deviceID
        self.accountIDs = accountIDs
    }

    /// Routes grouped per token, in the order the tokens first appear.
    public static func grouping(_ routes: [PushRoute]) -> [PushTarget] {
        var targets: [PushTarget] = []
        var index: [String: Int] = [:]
        for route in routes {
            let key = route.provider.rawValue + ":" + route.token
            if let i = index[key] {
                targets[i].accountIDs.append(route.accountID)
            } else {
                index[key] = targets.count
                targets.append(PushTarget(
                    provider: route.provider, token: route.token, environment: route.environment, deviceID: route.deviceID,
                    accountIDs: [route.accountID]))
            }
        }
        return targets
    }
}

extension DeviceRecord {
    /// The routing rule: the device's tokens reach the account while it is active here, has
    /// its pushes on here, and the device routes all its accounts or this one is current.
    /// (A retired device holds no active account, which the schema's triggers enforce.)
    public func routesPushes(to accountID: String) -> Bool {
        guard retiredAt == nil, let pair = account(accountID), pair.state == .active else { return false }
        return Self.routesPushes(pushEnabled: pair.pushEnabled, mode: pushMode, isCurrent: currentAccountID == accountID)
    }

    /// The rule for one active pair: the support CLI asks it of a device record, the stores of
    /// each row their push-target query reads (which selects active pairs and leaves the rest to this).
    public static func routesPushes(pushEnabled: Bool, mode: PushMode, isCurrent: Bool) -> Bool {
        pushEnabled && (mode == .all || isCurrent)
    }
}

extension FieldRules {
    /// The most account ids one push-targets request may ask for.
    public static let maxPushTargetAccounts = 1000

    /// APNs: 64–200 hexadecimal digits, kept lower-case; FCM: 1–4 096 characters of
    /// `[A-Za-z0-9_:.-]`, kept as sent.
    public static func pushToken(_ text: String, provider: PushProvider) throws(TransferError) -> String {
        let utf8 = text.utf8
        switch provider {
        case .apns:
            guard (64...200).contains(utf8.count), utf8.allSatisfy(isHexDigit) else {
                throw .invalidPushToken("an apns token is 64 to 200 hexadecimal digits")
            }
            return text.lowercased()
        case .fcm:
            guard (1...4096).contains(utf8.count), utf8.allSatisfy(isFCMByte) else {
                throw .invalidPushToken("an fcm token is 1 to 4096 characters of A-Z, a-z, 0-9, _, :, . and -")
            }
            return text
        }
    }

    private static func isHexDigit(_ c: UInt8) -> Bool {
        (c >= 48 && c <= 57) || (c >= 65 && c <= 70) || (c >= 97 && c <= 102)
    }

    private static func isFCMByte(_ c: UInt8) -> Bool {
        (c >= 48 && c <= 58) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 45 || c == 46 || c == 95
    }
}
