#!/usr/bin/env python3
"""Fails when openapi.yaml repeats a key inside one mapping.

YAML 1.2 forbids it, and generators disagree about it: openapi-python-client refuses the
file, PyYAML silently keeps the second value. Run by scripts/schemathesis.sh (PyYAML comes
with schemathesis)."""
import sys
import yaml

path = sys.argv[1] if len(sys.argv) > 1 else "openapi.yaml"
found = []


class Strict(yaml.SafeLoader):
    pass


def mapping(loader, node, deep=False):
    seen = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            found.append(f"{path}:{key_node.start_mark.line + 1}: '{key}' again (first at line {seen[key]})")
        else:
            seen[key] = key_node.start_mark.line + 1
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


Strict.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, mapping)
with open(path) as f:
    yaml.load(f, Loader=Strict)
for line in found:
    print(line, file=sys.stderr)
sys.exit(1 if found else 0)
