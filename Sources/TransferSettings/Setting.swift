import Foundation
import TransferCore

/// One flag, declared once: its name (`--NAME`), environment variable (`TRANSFER_NAME`), type,
/// default, how its text is checked and turned into a value, and its help. The server's
/// command line, its `--help`, the environment and the `transfer` CLI all read it from here.
public struct Setting<Value: Sendable>: Sendable {
    /// The flag without its dashes: `transfer-ttl`.
    public let name: String
    /// What it sets, one sentence (the flag, variable and default are added where it is shown).
    public let help: String
    /// What `--help` shows after the flag: `<duration>`.
    public let valueName: String
    public let defaultValue: Value
    /// The default as the operator writes it (`24h`, `off`, `number of cores`).
    public let defaultText: String
    /// A secret (a key, a password in a URL): may come from the file `TRANSFER_NAME_FILE`
    /// names, and is never repeated in a message.
    public let isSecret: Bool
    /// What the command line says when the flag comes without a value, instead of "missing
    /// value": a flag that was a switch once names its new form (`--trusted-proxy`).
    public let withoutValue: String?
    /// Its row's text in the flag table of `docs/operating.md` (Markdown, links relative to
    /// that file), set with `documented(_:)`; `ServerFlags.table` makes the table from it.
    public private(set) var documentation = ""
    let convert: @Sendable (String) throws(SettingProblem) -> Value

    public init(
        _ name: String, _ help: String, value valueName: String, default defaultValue: Value, shown defaultText: String,
        secret: Bool = false, withoutValue: String? = nil, read: @escaping @Sendable (String) throws(SettingProblem) -> Value
    ) {
        self.name = name
        self.help = help
        self.valueName = valueName
        self.defaultValue = defaultValue
        self.defaultText = defaultText
        self.isSecret = secret
        self.withoutValue = withoutValue
        self.convert = read
    }

    /// The same setting with `text` as its row in the flag table of `docs/operating.md`.
    public func documented(_ text: String) -> Self {
        var setting = self
        setting.documentation = text
        return setting
    }

    /// `--transfer-ttl`.
    public var flag: String { "--" + name }
    /// `TRANSFER_TRANSFER_TTL`.
    public var environmentName: String { "TRANSFER_" + name.uppercased().replacingOccurrences(of: "-", with: "_") }
    /// `TRANSFER_WEBHOOK_SECRET_FILE`: a file holding the value (secrets only).
    public var fileEnvironmentName: String? { isSecret ? environmentName + "_FILE" : nil }

    /// The value `text` stands for; the error names `source` (the flag unless told).
    public func parse(_ text: String, source: String? = nil) throws(Invalid) -> Value {
        do {
            return try convert(text)
        } catch {
            throw Invalid(description: "\(source ?? flag): \(error.message)")
        }
    }
}

/// What is wrong with a value, said after the flag or variable that held it: `'2x' is not a duration …`.
public struct SettingProblem: Error {
    public let message: String
    public init(_ message: String) { self.message = message }
}

/// A bad value: one line for the operator, naming the flag, variable or file it came from.
public struct Invalid: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// A value that was given, and where: `--port`, `TRANSFER_PORT` or `TRANSFER_PORT_FILE`.
public struct Given<Value: Sendable>: Sendable {
    public let value: Value
    /// As written (for messages; never shown for a secret).
    public let text: String
    public let source: String
}

/// What a setting shows in `--help` and the CLI's help, whatever its type.
public protocol SettingDescription: Sendable {
    var name: String { get }
    var help: String { get }
    var valueName: String { get }
    var defaultText: String { get }
    var isSecret: Bool { get }
    var withoutValue: String? { get }
    var documentation: String { get }
    var flag: String { get }
    var environmentName: String { get }
    var fileEnvironmentName: String? { get }
}

extension Setting: SettingDescription {}

extension SettingDescription {
    /// The help with its variable and default: `Lifetime of a pending transfer. (TRANSFER_TRANSFER_TTL; default 24h)`.
    public var fullHelp: String {
        let file = fileEnvironmentName.map { ", or a file named by \($0)" } ?? ""
        return "\(help) (\(environmentName)\(file); default \(defaultText))"
    }
}

/// Where values come from, in order: the command line, then `TRANSFER_NAME`, then (secrets)
/// the file `TRANSFER_NAME_FILE` names; a setting given nowhere has its default.
public struct SettingValues: Sendable {
    /// Values from the command line, by setting name (`transfer-ttl` → `48h`).
    public var flags: [String: String]
    public var environment: [String: String]

    public init(flags: [String: String] = [:], environment: [String: String]) {
        self.flags = flags
        self.environment = environment
    }

    /// The value given for `setting` and where, or nil when it was given nowhere.
    public func given<Value>(_ setting: Setting<Value>) throws(Invalid) -> Given<Value>? {
        guard let (text, source) = try self.text(of: setting) else { return nil }
        return Given(value: try setting.parse(text, source: source), text: text, source: source)
    }

    /// The value given for `setting`, else its default.
    public func value<Value>(_ setting: Setting<Value>) throws(Invalid) -> Value {
        try given(setting)?.value ?? setting.defaultValue
    }

    /// Where a value for `setting` was given, without reading it (for "X needs Y").
    public func source(of setting: some SettingDescription) -> String? {
        if flags[setting.name] != nil { return setting.flag }
        if environment[setting.environmentName] != nil { return setting.environmentName }
        if let file = setting.fileEnvironmentName, environment[file] != nil { return file }
        return nil
    }

    func text(of setting: some SettingDescription) throws(Invalid) -> (String, String)? {
        if let text = flags[setting.name] { return (text, setting.flag) }
        let variable = environment[setting.environmentName]
        guard let fileVariable = setting.fileEnvironmentName, let path = environment[fileVariable] else {
            return variable.map { ($0, setting.environmentName) }
        }
        guard variable == nil else {
            throw Invalid(description: "\(setting.environmentName) and \(fileVariable) are both set; keep one")
        }
        // A secret's file: its whole content, without the line break editors and `echo` add.
        guard let data = FileManager.default.contents(atPath: path), let content = String(data: data, encoding: .utf8) else {
            throw Invalid(description: "\(fileVariable): cannot read '\(path)'")
        }
        return (content.trimmingCharacters(in: .whitespacesAndNewlines), fileVariable)
    }
}

// MARK: - Kinds of values

extension Setting where Value == String {
    /// Text as given (`--hostname`).
    public static func text(_ name: String, _ help: String, value: String = "text", default defaultValue: String) -> Self {
        Self(name, help, value: value, default: defaultValue, shown: defaultValue) { $0 }
    }

    /// An `http(s)` URL.
    public static func url(_ name: String, _ help: String, default defaultValue: String) -> Self {
        Self(name, help, value: "url", default: defaultValue, shown: defaultValue) { text throws(SettingProblem) in
            try Kinds.httpURL(text)
        }
    }
}

extension Setting where Value == Int {
    /// A whole number in `range`.
    public static func integer(
        _ name: String, _ help: String, in range: ClosedRange<Int>, default defaultValue: Int, shown: String? = nil
    ) -> Self {
        Self(name, help, value: "n", default: defaultValue, shown: shown ?? "\(defaultValue)") { text throws(SettingProblem) in
            guard let n = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(n) else {
                throw SettingProblem("'\(text)' is not a whole number from \(range.lowerBound) to \(range.upperBound)")
            }
            return n
        }
    }
}

extension Setting where Value == Duration {
    /// `30s`, `15m`, `24h`, `7d`.
    public static func duration(_ name: String, _ help: String, default defaultValue: Duration, shown: String? = nil) -> Self {
        Self(name, help, value: "duration", default: defaultValue, shown: shown ?? defaultValue.flagText) { text throws(SettingProblem) in
            try Kinds.duration(text)
        }
    }
}

extension Setting where Value == RateLimit? {
    /// `N/PERIOD` (`60/1m`) or `off` (nil).
    public static func rateLimit(_ name: String, _ help: String, default defaultValue: RateLimit?) -> Self {
        Self(name, help, value: "N/PERIOD|off", default: defaultValue, shown: defaultValue?.flagText ?? "off") {
            text throws(SettingProblem) in
            let t = text.trimmingCharacters(in: .whitespaces)
            if t.lowercased() == "off" { return nil }
            let parts = t.split(separator: "/", maxSplits: 1)
            guard parts.count == 2, let n = Int(parts[0]), n > 0 else { throw SettingProblem("'\(text)' is not N/PERIOD (like 60/1m) or off") }
            return RateLimit(count: n, period: try Kinds.duration(String(parts[1])))
        }
    }
}

extension Setting where Value == [String]? {
    /// Comma-separated names, at least one, each checked by `check` (nil: fine); nil (off) when not given.
    public static func list(
        _ name: String, _ help: String, value: String, empty: String, check: @escaping @Sendable (String) -> String? = { _ in nil }
    ) -> Self {
        Self(name, help, value: value, default: nil, shown: "off") { text throws(SettingProblem) in
            let items = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
            guard !items.isEmpty else { throw SettingProblem(empty) }
            for item in items { if let problem = check(item) { throw SettingProblem(problem) } }
            return items
        }
    }
}

extension RateLimit {
    /// As written on the command line: `60/1m`.
    public var flagText: String { "\(count)/\(period.flagText)" }
}

/// The readers of the kinds of values above, for settings that add a rule of their own.
public enum Kinds {
    public static func duration(_ text: String) throws(SettingProblem) -> Duration {
        guard let duration = Duration(flag: text) else { throw SettingProblem("'\(text)' is not a duration like 90s, 15m, 24h or 7d") }
        return duration
    }

    public static func httpURL(_ text: String) throws(SettingProblem) -> String {
        guard let url = URL(string: text), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host?.isEmpty == false else {
            throw SettingProblem("'\(text)' is not an http(s) URL")
        }
        return text
    }
}
