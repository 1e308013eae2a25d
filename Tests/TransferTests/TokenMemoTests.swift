import Testing
@testable import TransferHTTP

/// The memo that spares a launch its signature keeps what was used lately: a working set that
/// fits is never dropped all at once.
@Suite("Token memo")
struct TokenMemoTests {
    @Test("a map of two generations keeps every entry used among the last `limit`, and moves an older one it finds to the newer")
    func keepsTheRecent() {
        var map = Generations<Int>(limit: 4)
        for i in 0..<10 { _ = map.insert(i, for: "k\(i)") }
        #expect(map.count <= 8)
        for i in 6..<10 { #expect(map.value(for: "k\(i)").value == i, "k\(i), among the last 4 inserted, was dropped") }
        #expect(map.value(for: "k0").value == nil)

        // k6 is found and kept while newer entries fill two generations around it.
        var map2 = Generations<Int>(limit: 4)
        for i in 0..<4 { _ = map2.insert(i, for: "k\(i)") }
        for i in 4..<12 {
            #expect(map2.value(for: "k1").value == 1, "k1, used before each insert, was dropped at insert \(i)")
            _ = map2.insert(i, for: "k\(i)")
        }
    }

    @Test("launches of 100 000 sessions at random, with room for 65 536 a generation, find nearly all their tokens once each was signed")
    func workingSetThatFits() {
        var map = Generations<Int>(limit: 65_536)
        var generator = SystemRandomNumberGenerator()
        for i in 0..<100_000 { _ = map.insert(i, for: "s\(i)") }
        var hits = 0
        for _ in 0..<200_000 {
            let i = Int.random(in: 0..<100_000, using: &generator)
            if map.value(for: "s\(i)").value != nil { hits += 1 } else { _ = map.insert(i, for: "s\(i)") }
        }
        #expect(hits > 150_000, "only \(hits) of 200 000 launches found their token: the map forgets what it is still using")
    }
}
