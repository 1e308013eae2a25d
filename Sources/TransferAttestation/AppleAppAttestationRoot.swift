import Crypto
import Foundation
import SwiftASN1
import X509

extension AppAttestVerifier {
    /// Apple App Attestation Root CA, as Apple publishes it
    /// (www.apple.com/certificateauthority/Apple_App_Attestation_Root_CA.pem):
    /// CN=Apple App Attestation Root CA, O=Apple Inc., ST=California, ECDSA P-384,
    /// valid 2020-03-18 18:32:53 UTC to 2045-03-15 00:00:00 UTC, self-signed.
    /// Pinned by `appleRootFingerprint`: the PEM is checked against it when first read.
    public static let appleRootPEM = """
        -----BEGIN CERTIFICATE-----
        MIICITCCAaegAwIBAgIQC/O+DvHN0uD7jG5yH2IXmDAKBggqhkjOPQQDAzBSMSYw
        JAYDVQQDDB1BcHBsZSBBcHAgQXR0ZXN0YXRpb24gUm9vdCBDQTETMBEGA1UECgwK
        QXBwbGUgSW5jLjETMBEGA1UECAwKQ2FsaWZvcm5pYTAeFw0yMDAzMTgxODMyNTNa
        Fw00NTAzMTUwMDAwMDBaMFIxJjAkBgNVBAMMHUFwcGxlIEFwcCBBdHRlc3RhdGlv
        biBSb290IENBMRMwEQYDVQQKDApBcHBsZSBJbmMuMRMwEQYDVQQIDApDYWxpZm9y
        bmlhMHYwEAYHKoZIzj0CAQYFK4EEACIDYgAERTHhmLW07ATaFQIEVwTtT4dyctdh
        NbJhFs/Ii2FdCgAHGbpphY3+d8qjuDngIN3WVhQUBHAoMeQ/cLiP1sOUtgjqK9au
        Yen1mMEvRq9Sk3Jm5X8U62H+xTD3FE9TgS41o0IwQDAPBgNVHRMBAf8EBTADAQH/
        MB0GA1UdDgQWBBSskRBTM72+aEH/pwyp5frq5eWKoTAOBgNVHQ8BAf8EBAMCAQYw
        CgYIKoZIzj0EAwMDaAAwZQIwQgFGnByvsiVbpTKwSga0kP0e8EeDS4+sQmTvb7vn
        53O5+FRXgeLhpJ06ysC5PrOyAjEAp5U4xDgEgllF7En3VcE3iexZZtKeYnpqtijV
        oyFraWVIyd/dganmrduC1bmTBGwD
        -----END CERTIFICATE-----
        """

    /// SHA-256 of the root's DER, as Apple's certificate authority page lists it
    /// (1C:B9:82:3B:A2:8B:A6:AD:2D:33:A0:06:94:1D:E2:AE:4F:51:3E:F1:D4:E8:31:B9:F7:E0:FA:7B:62:42:C9:32).
    public static let appleRootFingerprint: [UInt8] = [
        0x1C, 0xB9, 0x82, 0x3B, 0xA2, 0x8B, 0xA6, 0xAD, 0x2D, 0x33, 0xA0, 0x06, 0x94, 0x1D, 0xE2, 0xAE,
        0x4F, 0x51, 0x3E, 0xF1, 0xD4, 0xE8, 0x31, 0xB9, 0xF7, 0xE0, 0xFA, 0x7B, 0x62, 0x42, 0xC9, 0x32,
    ]

    /// The built-in root, parsed once; a PEM that does not match the pinned fingerprint stops
    /// the process rather than trusting something else.
    public static let appleRoot: Certificate = {
        guard let document = try? PEMDocument(pemString: appleRootPEM),
            Array(SHA256.hash(data: document.derBytes)) == appleRootFingerprint,
            let root = try? Certificate(derEncoded: document.derBytes)
        else { preconditionFailure("the built-in Apple App Attestation Root CA does not match its pinned fingerprint") }
        return root
    }()
}
