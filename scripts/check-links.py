#!/usr/bin/env python3
"""Fails on a broken relative link or anchor in the repository's Markdown files.

    scripts/check-links.py

Checks every `[text](target)` of every Markdown file git tracks (and the untracked ones it
does not ignore): a relative path must exist, and an anchor (`file.md#heading`, `#heading`)
must name a heading of that file as GitHub makes its anchors. Links to other sites are not
followed (no test needs the internet). Prints each broken link with its file and line.
"""
import os, re, subprocess, sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def slug(heading):
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"`([^`]*)`", r"\1", heading.strip()).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def lines_outside_code(path):
    fenced = False
    for number, line in enumerate(open(path, encoding="utf-8"), 1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def anchors(path, cache={}):
    if path not in cache:
        seen, found = {}, set()
        for _, line in lines_outside_code(path):
            m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                found.add(base if n == 0 else f"{base}-{n}")
        cache[path] = found
    return cache[path]


def main():
    files = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
                           cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()
    broken = []
    for name in files:
        path = os.path.join(ROOT, name)
        if not os.path.exists(path):
            continue
        for number, line in lines_outside_code(path):
            for target in LINK.findall(re.sub(r"`[^`]*`", "", line)):
                if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
                    continue  # https:, mailto: …
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                if not (dest + os.sep).startswith(ROOT + os.sep):
                    broken.append(f"{name}:{number}: {target}: leads out of the repository (a reader of a clone has nothing there)")
                elif not os.path.exists(dest):
                    broken.append(f"{name}:{number}: {target}: no such file")
                elif anchor and dest.endswith(".md") and anchor.lower() not in anchors(dest):
                    broken.append(f"{name}:{number}: {target}: no heading with that anchor")
    for line in broken:
        print(line)
    print(f"{len(files)} Markdown files, {len(broken)} broken links", file=sys.stderr)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
