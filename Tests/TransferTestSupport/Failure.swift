/// A helper call that did not get what it needed. It is thrown at the call, so the test stops
/// there, and its description carries what was answered instead.
struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
