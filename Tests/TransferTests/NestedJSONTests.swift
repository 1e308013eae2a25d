import Foundation
import HTTPTypes
import Testing
@testable import TransferHTTP
@testable import TransferTestSupport

/// JSON nested deeper than 32 levels is refused before it is decoded (contract v1.3, bounded
/// cost per request): a 1 KiB body nested 500 deep once cost the server a second of CPU.
@Suite("Nested JSON")
struct NestedJSONTests {
    static func nestedArrays(_ depth: Int, centre: String = "1") -> String {
        String(repeating: "[", count: depth) + centre + String(repeating: "]", count: depth)
    }

    /// `depth` objects in each other: `{"a":{"a":…}}`.
    static func nestedObjects(_ depth: Int, centre: String = "1") -> String {
        String(repeating: #"{"a":"#, count: depth) + centre + String(repeating: "}", count: depth)
    }

    @Test("a body nested 33 deep is refused 400 invalid_request naming the depth, on a route that needs no token", arguments: [
        nestedObjects(33), nestedObjects(500), nestedObjects(500, centre: "1e999"),
        #"{"a":"# + nestedArrays(32) + "}", #"{"a":"# + nestedArrays(499, centre: "1e999") + "}",
    ])
    func tooDeep(_ body: String) async throws {
        try await withServer { api, _ in
            let r = try await api.call(.post, "/v1/devices/login", raw: body)
            #expect(r.status == .badRequest, "\(r.text)")
            #expect(r.error == "invalid_request")
            #expect(r["message"] as? String == "The request body is nested deeper than 32 levels.", "\(r.text)")
        }
    }

    @Test("a body nested 32 deep is read: the route's own rule answers")
    func atTheLimit() async throws {
        try await withServer { api, _ in
            for body in [Self.nestedObjects(32), #"{"a":"# + Self.nestedArrays(31) + "}"] {
                let r = try await api.call(.post, "/v1/devices/login", raw: body)
                #expect(r.status == .badRequest, "\(r.text)")
                #expect(r["message"] as? String == "deviceId is required.", "a body 32 deep is read whole: \(r.text)")
            }
        }
    }

    @Test("a too-deep body that is also broken JSON is refused for its depth, before the rest is read")
    func tooDeepAndBroken() async throws {
        try await withServer { api, _ in
            let r = try await api.call(.post, "/v1/devices/login", raw: Self.nestedArrays(40) + "]]]]}}}{")
            #expect(r["message"] as? String == "The request body is nested deeper than 32 levels.", "\(r.text)")
        }
    }
}

/// The parser's work: each value read once, whatever the nesting, so a body's cost follows its
/// size (the decoder it replaced tried each kind in turn at every level, building an error
/// for each, and cost grew with the cube of the depth).
@Suite("JSON parser")
struct JSONParserTests {
    @Test("each value is read exactly once, at every depth up to the limit and in a 16 KiB body of such nests", arguments: [1, 8, 16, 32])
    func linear(_ depth: Int) throws {
        for body in [NestedJSONTests.nestedArrays(depth), NestedJSONTests.nestedObjects(depth)] {
            let parsed = try JSONParser.parse(Array(body.utf8))
            #expect(parsed.values == depth + 1, "\(parsed.values) values read in a body of \(depth + 1)")
        }
        let nest = NestedJSONTests.nestedArrays(depth - 1)
        let count = 16 * 1024 / (nest.utf8.count + 1)
        let wide = "[" + Array(repeating: nest, count: count).joined(separator: ",") + "]"
        let parsed = try JSONParser.parse(Array(wide.utf8))
        #expect(parsed.values == 1 + count * depth, "\(parsed.values) values read in a body of \(1 + count * depth)")
    }

    @Test("nesting past the limit stops the parse, also in JSON that is broken further on")
    func tooDeep() {
        #expect(throws: JSONParser.Failure.tooDeep) { try JSONParser.parse(Array(NestedJSONTests.nestedArrays(33).utf8)) }
        #expect(throws: JSONParser.Failure.tooDeep) { try JSONParser.parse(Array(("[" + NestedJSONTests.nestedObjects(32) + "]").utf8)) }
        #expect(throws: JSONParser.Failure.tooDeep) { try JSONParser.parse(Array((String(repeating: "[", count: 40) + "}}}").utf8)) }
    }

    @Test("strict JSON: kinds are never guessed, and anything that is not RFC 8259 is refused")
    func strict() throws {
        #expect(try JSONParser.parse(Array(#"{"a":1,"b":"true","c":true,"d":null,"e":-0.5e1}"#.utf8)).value
            == .object(["a": .number(1), "b": .string("true"), "c": .bool(true), "d": .null, "e": .number(-5)]))
        #expect(try JSONParser.parse(Array(#"["a\u0041\/\n","\ud83d\ude00"]"#.utf8)).value == .array([.string("aA/\n"), .string("😀")]))
        #expect(try JSONParser.parse([0xEF, 0xBB, 0xBF] + Array("{}".utf8)).value == .object([:]), "a byte order mark")
        for bad in [
            "[1,]", #"{"a":1,}"#, "01", "1.", ".5", "+1", "1e", "1e999", "-1e999", "tru", "nul", "[1 2]", #"{"a" 1}"#,
            #""\ud83d""#, #""\ude00""#, #""\x""#, "\"tab\there\"", #""abc"#, "[", #"{"a":1}x"#, "", " ",
        ] {
            #expect(throws: JSONParser.Failure.invalid, "\(bad)") { try JSONParser.parse(Array(bad.utf8)) }
        }
    }
}
