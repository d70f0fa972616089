#!/usr/bin/env python3
"""Writes the seed corpus of the capi fuzz target (tests/fuzz/fuzz_capi.cpp) to
tests/fuzz/corpus-capi/: every program under programs/ and every passing conformance program,
assembled by tilus-asm (with and without -g), each behind two argument descriptions (all bytes
0x30: scalars 32, buffers of 3072 bytes, unchecked; all bytes 0x31: scalars 33, buffers of 3136
bytes, checked).

Usage: tests/fuzz/make_capi_seeds.py BUILD_DIR   (uses BUILD_DIR/tools/tilus-asm)
"""
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def sources():
    """(seed name, path) of every program under programs/ and every passing conformance
    program."""
    programs = os.path.join(ROOT, "programs")
    for base, dirs, names in os.walk(programs):
        dirs.sort()
        for name in sorted(names):
            if name.endswith(".tasm"):
                path = os.path.join(base, name)
                yield os.path.relpath(path, programs)[:-5].replace(os.sep, "_"), path
    conformance = os.path.join(ROOT, "tests", "conformance")
    for name in sorted(os.listdir(conformance)):
        path = os.path.join(conformance, name)
        if name.endswith(".tasm") and "# expect: ok" in open(path).read():
            yield name[:-5], path


def main():
    asm = os.path.join(sys.argv[1], "tools", "tilus-asm")
    out = os.path.join(ROOT, "tests", "fuzz", "corpus-capi")
    os.makedirs(out, exist_ok=True)
    count = 0
    with tempfile.TemporaryDirectory() as tmp:
        for stem, path in sources():
            for flags, suffix in (([], ""), (["-g"], "_g")):
                tbc = os.path.join(tmp, stem + suffix + ".tbc")
                subprocess.run([asm, path, "-o", tbc] + flags, check=True)
                module = open(tbc, "rb").read()
                for fill in (0x30, 0x31):
                    args = bytes([fill]) * 24
                    seed = len(args).to_bytes(2, "little") + args + module
                    name = "%s%s_%02x" % (stem, suffix, fill)
                    with open(os.path.join(out, name), "wb") as f:
                        f.write(seed)
                    count += 1
    print("wrote %d seeds to %s" % (count, out))


if __name__ == "__main__":
    main()
