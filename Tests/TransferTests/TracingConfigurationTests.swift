import Testing
@testable import TransferHTTP
import TransferSettings

/// Traces are configured by the standard `OTEL_*` variables, checked at start like the flags.
@Suite("Tracing configuration")
struct TracingConfigurationTests {
    static func load(_ environment: [String: String]) throws -> TracingConfiguration? {
        try ServerConfiguration.load(arguments: [], environment: environment).tracing
    }

    static func refusal(_ environment: [String: String]) -> String {
        do {
            _ = try load(environment)
            return "(accepted)"
        } catch {
            return "\(error)"
        }
    }

    @Test("off unless a variable says where to export: no variable, OTEL_TRACES_EXPORTER=none, or OTEL_SDK_DISABLED=true")
    func offByDefault() throws {
        #expect(try Self.load([:]) == nil)
        #expect(try Self.load(["OTEL_SERVICE_NAME": "transfer", "OTEL_TRACES_SAMPLER": "always_on"]) == nil)
        let endpoint = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]
        #expect(try Self.load(endpoint.merging(["OTEL_TRACES_EXPORTER": "none"]) { $1 }) == nil)
        #expect(try Self.load(endpoint.merging(["OTEL_SDK_DISABLED": "TRUE"]) { $1 }) == nil)
        #expect(try Self.load(["OTEL_EXPORTER_OTLP_ENDPOINT": ""]) == nil)
    }

    @Test("on with an OTLP endpoint or OTEL_TRACES_EXPORTER=otlp; the general endpoint gets /v1/traces, the traces one is used as given")
    func onWithEndpoint() throws {
        let general = try #require(try Self.load(["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]))
        #expect(general.endpoint == "http://collector:4318/v1/traces")
        #expect(general.transport == "http/protobuf")
        let specific = try #require(try Self.load([
            "OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://traces.example.com/in",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json",
        ]))
        #expect(specific.endpoint == "https://traces.example.com/in")
        #expect(specific.transport == "http/json")
        let byDefault = try #require(try Self.load(["OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "false"]))
        #expect(byDefault.endpoint == "http://localhost:4318/v1/traces")
    }

    @Test("a value the server cannot honour stops it at start, naming the variable; a header's value is never repeated")
    func refusals() {
        let on = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]
        func refused(_ extra: [String: String]) -> String { Self.refusal(on.merging(extra) { $1 }) }
        #expect(refused(["OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"]).contains("OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc'"))
        #expect(refused(["OTEL_TRACES_EXPORTER": "zipkin"]).contains("OTEL_TRACES_EXPORTER: 'zipkin'"))
        #expect(refused(["OTEL_SDK_DISABLED": "yes"]).contains("OTEL_SDK_DISABLED"))
        #expect(refused(["OTEL_TRACES_SAMPLER": "sometimes"]).contains("OTEL_TRACES_SAMPLER"))
        #expect(refused(["OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"]).contains("OTEL_TRACES_SAMPLER_ARG"))
        #expect(refused(["OTEL_BSP_SCHEDULE_DELAY": "5s"]).contains("OTEL_BSP_SCHEDULE_DELAY"))
        #expect(refused(["OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"]).contains("OTEL_EXPORTER_OTLP_COMPRESSION"))
        let endpoint = Self.refusal(["OTEL_EXPORTER_OTLP_ENDPOINT": "collector-with-secret:4318"])
        #expect(endpoint.contains("OTEL_EXPORTER_OTLP_ENDPOINT") && !endpoint.contains("secret"), "\(endpoint)")
        let header = refused(["OTEL_EXPORTER_OTLP_HEADERS": "authorization Bearer-hunter2"])
        #expect(header.contains("OTEL_EXPORTER_OTLP_HEADERS") && !header.contains("hunter2"), "\(header)")
        #expect((try? Self.load(on.merging(["OTEL_EXPORTER_OTLP_HEADERS": "authorization=Bearer%20hunter2,x-team=a"]) { $1 })) != nil)
    }

    @Test("OTEL_PROPAGATORS: tracecontext or none; baggage is dropped, any other is refused at start instead of stopping the process later")
    func propagators() throws {
        let endpoint = ["OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"]
        let common = try #require(try Self.load(endpoint.merging(["OTEL_PROPAGATORS": "tracecontext,baggage"]) { $1 }))
        #expect(common.environment["OTEL_PROPAGATORS"] == "tracecontext")
        let refused = Self.refusal(endpoint.merging(["OTEL_PROPAGATORS": "tracecontext,b3"]) { $1 })
        #expect(refused.contains("OTEL_PROPAGATORS: 'b3' is not supported"), "\(refused)")
    }

    @Test("the endpoint and the headers reach swift-otel in code, never as variables it would log with their values")
    func credentialsNotPassedAsVariables() throws {
        let loaded = try #require(try Self.load([
            "OTEL_EXPORTER_OTLP_ENDPOINT": "https://user:pass@collector:4318", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "https://user:pass@collector/in",
            "OTEL_EXPORTER_OTLP_HEADERS": "api-key=k3y",
        ]))
        #expect(loaded.endpoint == "https://user:pass@collector/in")
        #expect(loaded.environment.keys.filter { $0.hasSuffix("_ENDPOINT") || $0.hasSuffix("_HEADERS") }.isEmpty, "\(loaded.environment.keys)")
    }
}
