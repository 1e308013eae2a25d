/// The flag table of `docs/operating.md`, made from the declarations so it cannot go stale:
/// `ConfigurationTests` fails while the file's copy between `tableStart` and `tableEnd` differs.
extension ServerFlags {
    /// The marker line before the generated table.
    public static let tableStart = "<!-- flags: generated from ServerFlags.all; refresh with: UPDATE_DOCS=1 swift test --filter ConfigurationTests -->"
    /// The marker line after it.
    public static let tableEnd = "<!-- end of flags -->"

    /// One row per flag, in `--help`'s order: flag, variable, default, and its `documentation`.
    public static var table: String {
        var rows = ["| flag | variable | default | meaning |", "|---|---|---|---|"]
        for setting in all {
            // A default written as prose (`number of cores`) stays prose; a value is code.
            let shown = setting.defaultText.contains(" ") ? setting.defaultText : "`\(setting.defaultText)`"
            let file = setting.fileEnvironmentName.map { ". A secret: also from the file `\($0)` names" } ?? ""
            let cells = ["`\(setting.flag)`", "`\(setting.environmentName)`", shown, setting.documentation + file]
            rows.append("| " + cells.map { $0.replacingOccurrences(of: "|", with: "\\|") }.joined(separator: " | ") + " |")
        }
        return rows.joined(separator: "\n")
    }
}
