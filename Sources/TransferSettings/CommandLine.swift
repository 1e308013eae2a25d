/// The command line of a program whose flags are all `Setting`s (`transfer-server`):
/// `--name value`, `--name=value`, and `--help`.
public enum SettingsCommandLine {
    public enum Parsed: Equatable {
        /// `-h` or `--help`.
        case help
        /// The values given, by setting name; the last one given wins.
        case flags([String: String])
    }

    /// An unknown flag, a value missing or left over: one line.
    public struct UsageError: Error, CustomStringConvertible {
        public let description: String
    }

    public static func parse(_ arguments: [String], settings: [any SettingDescription]) throws(UsageError) -> Parsed {
        let byName = Dictionary(settings.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        var flags: [String: String] = [:]
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            if argument == "-h" || argument == "--help" { return .help }
            guard argument.hasPrefix("--") else { throw UsageError(description: "unexpected argument '\(argument)'") }
            let parts = argument.dropFirst(2).split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = String(parts[0])
            guard let setting = byName[name] else { throw UsageError(description: "unknown option '--\(name)'") }
            if parts.count == 2 {
                flags[name] = String(parts[1])
            } else if let value = rest.first, !value.hasPrefix("--") {
                flags[name] = rest.removeFirst()
            } else {
                throw UsageError(description: setting.withoutValue ?? "missing value for '--\(name) <\(setting.valueName)>'")
            }
        }
        return .flags(flags)
    }

    /// `--help`: every flag with its variable and default.
    public static func help(command: String, abstract: String, settings: [any SettingDescription]) -> String {
        var lines = [
            "OVERVIEW: \(abstract)", "",
            "Every flag can also be set as the environment variable named beside it; a flag wins over",
            "its variable. A secret can also be read from a file: set VARIABLE_FILE to its path.", "",
            "USAGE: \(command) [--<flag> <value> ...]", "",
            "FLAGS:",
        ]
        for setting in settings {
            lines.append("  \(setting.flag) <\(setting.valueName)>")
            lines.append("        \(setting.fullHelp)")
        }
        lines.append("  -h, --help")
        lines.append("        Show this help.")
        return lines.joined(separator: "\n")
    }
}
