// A stand-in for Apple's Core Image (and the Core Graphics types it hands out) with the members
// TransferKit calls (see Security.swift).
import Foundation

public final class CGImage: @unchecked Sendable {}

public struct CGAffineTransform: Sendable {
    public init(scaleX sx: CGFloat, y sy: CGFloat) {}
}

open class CIImage: NSObject, @unchecked Sendable {
    open var extent: CGRect { .zero }
    open func transformed(by matrix: CGAffineTransform) -> CIImage { self }
}

open class CIFilter: NSObject, @unchecked Sendable {
    public init?(name: String) {}
    open func setValue(_ value: Any?, forKey key: String) {}  // NSObject's key-value coding on Apple platforms
    open var outputImage: CIImage? { nil }
}

open class CIContext: NSObject, @unchecked Sendable {
    public override init() {}
    open func createCGImage(_ image: CIImage, from fromRect: CGRect) -> CGImage? { nil }
}
