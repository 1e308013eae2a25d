// A stand-in for Apple's Security framework with the signatures TransferKit calls, so that the
// Apple-only sources type-check on Linux (typecheck-apple.sh). Nothing here runs. Core
// Foundation types are approximated by their Swift bridges: CFString as String, CFDictionary as
// [String: Any], CFTypeRef as AnyObject.
import Foundation
#if canImport(FoundationNetworking)
// On Apple platforms URLSession is Foundation's; on Linux the Apple-only sources find it here.
@_exported import FoundationNetworking
#endif

public typealias OSStatus = Int32
public typealias CFString = String
public typealias CFDictionary = [String: Any]
public typealias CFTypeRef = AnyObject

public let errSecSuccess: OSStatus = 0
public let errSecItemNotFound: OSStatus = -25300
public let errSecDuplicateItem: OSStatus = -25299

public let kSecClass: CFString = "class"
public let kSecClassGenericPassword: CFString = "genp"
public let kSecAttrService: CFString = "svce"
public let kSecAttrAccount: CFString = "acct"
public let kSecAttrAccessGroup: CFString = "agrp"
public let kSecAttrSynchronizable: CFString = "sync"
public let kSecAttrAccessible: CFString = "pdmn"
public let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
public let kSecAttrAccessibleAfterFirstUnlock: CFString = "ck"
@available(iOS 13.0, macOS 10.15, tvOS 13.0, watchOS 6.0, *)
public let kSecUseDataProtectionKeychain: CFString = "nleg"
public let kSecReturnData: CFString = "r_Data"
public let kSecReturnAttributes: CFString = "r_Attributes"
public let kSecMatchLimit: CFString = "m_Limit"
public let kSecMatchLimitOne: CFString = "m_LimitOne"
public let kSecMatchLimitAll: CFString = "m_LimitAll"
public let kSecValueData: CFString = "v_Data"

public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus { 0 }
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus { 0 }
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus { 0 }
public func SecItemDelete(_ query: CFDictionary) -> OSStatus { 0 }

// Foundation's Apple-only member the standard layout calls (absent from swift-corelibs-foundation).
extension FileManager {
    public func containerURL(forSecurityApplicationGroupIdentifier groupIdentifier: String) -> URL? { nil }
}
