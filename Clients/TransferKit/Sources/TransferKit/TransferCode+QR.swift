import Foundation

extension TransferCode {
    /// What a QR code of this code holds: the bytes of ``url(base:)`` (the code in the link's
    /// fragment), for any QR encoder: Core Image's `CIQRCodeGenerator` (``qrImage(base:scale:)``
    /// on Apple platforms) or your own. Scanning is left to the app: the camera app opens the
    /// link, and the app reads it with ``init(url:base:)``.
    public func qrPayload(base: URL) -> Data {
        Data(url(base: base).absoluteString.utf8)
    }
}

#if canImport(CoreImage)
import CoreImage

extension TransferCode {
    /// A QR code of ``url(base:)`` (``qrPayload(base:)``), drawn by Core Image's
    /// `CIQRCodeGenerator` at error correction level M, each module `scale` pixels wide, so that
    /// it stays sharp without interpolation; nil when Core Image cannot draw it.
    ///
    /// ```swift
    /// if let qr = offer.code.qrImage(base: transferLink) {
    ///     Image(decorative: qr, scale: 1).interpolation(.none)
    /// }
    /// ```
    public func qrImage(base: URL, scale: CGFloat = 10) -> CGImage? {
        guard let filter = CIFilter(name: "CIQRCodeGenerator") else { return nil }
        filter.setValue(qrPayload(base: base), forKey: "inputMessage")
        filter.setValue("M", forKey: "inputCorrectionLevel")
        guard let image = filter.outputImage?.transformed(by: CGAffineTransform(scaleX: scale, y: scale)) else { return nil }
        return CIContext().createCGImage(image, from: image.extent)
    }
}
#endif
