#!/usr/bin/env python3
"""`meson install --destdir` into a temporary folder, then checks on the installed copy only:

1. the library, the headers, the tools and tilusvm.pc are where the README's install section
   says (PREFIX/LIBDIR, PREFIX/include/tilusvm, PREFIX/bin, PREFIX/LIBDIR/pkgconfig);
2. `nm -D --defined-only` of the installed libtilusvm lists only tilusvm_* symbols, and every
   function that vm/include/tilusvm.h declares among them;
3. consumer.c (C99) and consumer_cpp.cpp (C++17 over the header-only tilusvm.hpp), compiled
   with the flags of `pkg-config --cflags --libs tilusvm` and nothing else (PKG_CONFIG_PATH and
   PKG_CONFIG_SYSROOT_DIR pointing into the destdir), run vector_add on the CPU interpreter
   through the installed library and check the result;
4. the installed tools run from there (their libraries found through their own rpath, not the
   build tree): tilus-asm assembles the consumer's program, tilusvm-cache answers --help.

    test_install.py BUILD_DIR SOURCE_DIR
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def run(cmd, **kw):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if proc.returncode != 0:
        raise SystemExit(f"FAILED ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout}")
    return proc.stdout


def main():
    build, source = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    options = {o["name"]: o["value"]
               for o in json.loads(run(["meson", "introspect", "--buildoptions", build]))}
    prefix = options["prefix"]
    libdir = os.path.join(prefix, options["libdir"])
    bindir = os.path.join(prefix, options["bindir"])
    includedir = os.path.join(prefix, options["includedir"])
    for tool in ("pkg-config", "nm"):
        if not shutil.which(tool):
            raise SystemExit(f"FAILED: {tool} is not installed (scripts/deps.sh installs it)")
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise SystemExit("FAILED: no C compiler (cc); scripts/deps.sh installs build-essential")

    with tempfile.TemporaryDirectory(prefix="tilusvm_install_") as tmp:
        dest = os.path.join(tmp, "dest")
        run(["meson", "install", "-C", build, "--no-rebuild", "--quiet", "--destdir", dest])
        at = lambda path: dest + path  # noqa: E731  (an absolute install path inside dest)

        # 1. Where everything went.
        expected = [os.path.join(libdir, "libtilusvm.so"), os.path.join(libdir, "libtilusvm.so.0"),
                    os.path.join(includedir, "tilusvm", "tilusvm.h"),
                    os.path.join(includedir, "tilusvm", "tilusvm.hpp"),
                    os.path.join(libdir, "pkgconfig", "tilusvm.pc")]
        expected += [os.path.join(bindir, t)
                     for t in ("tilus-asm", "vm-run", "tilus-tune", "tilusvm-cache")]
        missing = [p for p in expected if not os.path.exists(at(p))]
        if missing:
            raise SystemExit("FAILED: not installed: " + ", ".join(missing))
        print(f"installed under {dest}{prefix}: library, headers, tools, tilusvm.pc")

        # 2. The dynamic symbols of the installed library.
        library = at(os.path.join(libdir, "libtilusvm.so"))
        symbols = [line.split()[-1] for line in run(["nm", "-D", "--defined-only", library])
                   .splitlines() if line.strip()]
        foreign = [s for s in symbols if not s.startswith("tilusvm_")]
        if foreign:
            raise SystemExit(f"FAILED: libtilusvm exports {len(foreign)} symbols other than "
                             f"tilusvm_*, e.g. {foreign[:10]}")
        with open(os.path.join(source, "vm", "include", "tilusvm.h")) as f:
            declared = set(re.findall(r"TILUSVM_API\b[^;(]*?\b(tilusvm_\w+)\s*\(", f.read()))
        absent = sorted(declared - set(symbols))
        if not declared or absent:
            raise SystemExit(f"FAILED: declared in tilusvm.h but not exported: {absent}")
        print(f"nm -D --defined-only: {len(symbols)} symbols, all tilusvm_* "
              f"({len(declared)} declared in tilusvm.h, all exported)")

        # 3. A C program built with pkg-config's flags only.
        env = dict(os.environ, PKG_CONFIG_PATH=at(os.path.join(libdir, "pkgconfig")),
                   PKG_CONFIG_SYSROOT_DIR=dest)
        env.pop("PKG_CONFIG_LIBDIR", None)
        flags = run(["pkg-config", "--cflags", "--libs", "tilusvm"], env=env).split()
        for flag in flags:
            if flag.startswith(("-I", "-L")) and not flag[2:].startswith(dest):
                raise SystemExit(f"FAILED: pkg-config flag {flag} points outside the install")
        print("pkg-config --cflags --libs tilusvm: " + " ".join(flags))
        exe = os.path.join(tmp, "consumer")
        run([cc, "-std=c99", "-Wall", "-Werror", os.path.join(source, "tests", "install",
                                                                  "consumer.c"),
             "-o", exe] + flags)
        tbc = os.path.join(tmp, "vector_add.tbc")
        tools_env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        run([at(os.path.join(bindir, "tilus-asm")), os.path.join(source, "programs",
                                                                "vector_add.tasm"),
             "-o", tbc], env=tools_env)
        ldd = run(["ldd", at(os.path.join(bindir, "tilus-asm"))], env=tools_env)
        private = [line for line in ldd.splitlines() if "libtilusvm" in line]
        if not private or not all(dest in line for line in private):
            raise SystemExit("FAILED: the installed tilus-asm does not load its library from the "
                             "install:\n" + ldd)
        out = run([exe, tbc], env=dict(tools_env, LD_LIBRARY_PATH=at(libdir)))
        print(out.strip())
        if "consumer: ok" not in out:
            raise SystemExit("FAILED: the consumer did not report ok")
        # The same through tilusvm.hpp, from C++.
        cxx = os.environ.get("CXX", "").split()[-1:] or [shutil.which("c++") or "g++"]
        exe_cpp = os.path.join(tmp, "consumer_cpp")
        run(cxx + ["-std=c++17", "-Wall", "-Werror",
                   os.path.join(source, "tests", "install", "consumer_cpp.cpp"), "-o", exe_cpp]
            + flags)
        out = run([exe_cpp, tbc], env=dict(tools_env, LD_LIBRARY_PATH=at(libdir)))
        print(out.strip())
        if "consumer_cpp: ok" not in out:
            raise SystemExit("FAILED: the C++ consumer did not report ok")

        # 4. The other installed tools start.
        for tool, args in (("tilusvm-cache", ["--help"]), ("vm-run", ["--help"]),
                           ("tilus-tune", ["--help"])):
            run([at(os.path.join(bindir, tool))] + args, env=tools_env)
        print("installed tilus-asm, vm-run, tilus-tune and tilusvm-cache run")
    print("install: ok")


if __name__ == "__main__":
    main()
