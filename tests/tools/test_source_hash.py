#!/usr/bin/env python3
"""The kernel cache key follows the sources: the `src-` hash in the library's compiler version
(printed by `tilusvm-cache --version`) is the SHA-256 rule of docs/runtime.md, computed here
independently over the source tree as it is now. After any edit under isa/, loader/ or jit/ and
a rebuild, the hash must change with it; a stale hash (the build not rerunning
jit/source_hash.py) fails here.

    test_source_hash.py TILUSVM_CACHE SOURCE_ROOT
"""
import hashlib
import os
import re
import subprocess
import sys


def main():
    tool, root = sys.argv[1], sys.argv[2]
    out = subprocess.run([tool, "--version"], stdout=subprocess.PIPE, text=True).stdout
    m = re.search(r"\bsrc-([0-9a-f]{16})\b", out)
    if not m:
        print(f"FAILED: no src-<16 hex> in `tilusvm-cache --version`: {out!r}")
        return 1
    files = []
    for d in ("isa", "loader", "jit"):
        for base, _, names in os.walk(os.path.join(root, d)):
            for name in names:
                if name.endswith((".cpp", ".h", ".def", ".py")) or name == "meson.build":
                    files.append(os.path.relpath(os.path.join(base, name), root))
    digest = hashlib.sha256()
    for rel in sorted(files):
        with open(os.path.join(root, rel), "rb") as f:
            data = f.read()
        digest.update(rel.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    expected = digest.hexdigest()[:16]
    print(f"{len(files)} files under isa/, loader/, jit/: src-{expected}; library: src-{m.group(1)}")
    if m.group(1) != expected:
        print("FAILED: the library's source hash is not that of the sources (rebuild?)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
