#!/usr/bin/env python3
"""Where a kernel's warps wait, from Nsight Compute's warp-state samples per SASS instruction.

Profile one launch with the source counters, export the source page as CSV, then summarise it:

    ncu --clock-control none --section WarpStateStats --section SourceCounters \\
        -k regex:matmul -s 2 -c 1 -o R  vm-run PROGRAM.tbc --device cuda --kernel matmul ...
    ncu --import R.ncu-rep --page source --csv --print-source sass > R.csv
    python3 scripts/ncu_stalls.py R.csv [--top 20] [--groups 10] [--kernel NAME]

For each kernel in the file it prints the total of the warp-state samples ("Warp Stall Sampling
(All Samples)") and the share of each stall reason; the samples grouped by how often their
instructions ran ("Instructions Executed": the instructions of one loop body run equally often,
so the groups separate a k loop from the code that runs once per tile or per block); and the
instructions with the most samples, each with its offset from the kernel's first instruction,
its executions, its three largest stall reasons and its SASS. docs/contributing.md, "Profiling
a kernel", shows how the profiles of docs/jit.md and docs/attention.md were read this way.

Exit status: 0; 1 when the file cannot be read or is not such an export (the message names the
line and what is wrong); 2 on a usage error.
"""
import argparse
import csv
import sys

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
REQUIRED = ("Address", "Source", SAMPLES, EXECUTED)


class InputError(Exception):
    pass


def number(text):
    """An integer cell ('' and '-' are 0; thousands separators are dropped)."""
    text = text.strip().replace(",", "")
    if text in ("", "-"):
        return 0
    try:
        return int(float(text))
    except ValueError:
        raise InputError(f"'{text}' is not a number") from None


def kernels(rows, path):
    """The file's kernels: (name, header, instruction rows). A section starts with a
    "Kernel Name" row, then the header row, then one row per instruction."""
    out = []
    name, header = None, None
    for line, row in enumerate(rows, 1):
        if not row or not any(cell.strip() for cell in row):
            continue
        if row[0] == "Kernel Name":
            name = row[1] if len(row) > 1 else "?"
            header = None
            out.append([name, None, []])
            continue
        if header is None:
            if row[0] != "Address":
                raise InputError(f"{path}:{line}: expected the header row (\"Address\", "
                                 f"\"Source\", ...), found {row[0]!r}")
            missing = [c for c in REQUIRED if c not in row]
            if missing:
                raise InputError(f"{path}:{line}: the header has no column "
                                 + ", ".join(repr(c) for c in missing)
                                 + " (export with --page source --csv --print-source sass, "
                                   "from a report with --section SourceCounters)")
            header = {c: i for i, c in enumerate(row)}
            if not out:
                out.append(["?", None, []])
            out[-1][1] = header
            continue
        if len(row) < len(header):
            raise InputError(f"{path}:{line}: {len(row)} cells where the header has "
                             f"{len(header)}")
        out[-1][2].append((line, row))
    if not out:
        raise InputError(f"{path}: no kernel (an empty file?)")
    for name, header, _ in out:
        if header is None:
            raise InputError(f"{path}: kernel {name!r} has no header row")
    return out


def summarise(name, header, rows, top, groups, path):
    reasons = [c for c in header if c.startswith("stall_") and not c.endswith("(Not Issued)")]
    insts = []
    for line, row in rows:
        try:
            address = int(row[header["Address"]], 16)
        except ValueError:
            raise InputError(f"{path}:{line}: address {row[header['Address']]!r} is not "
                             "hexadecimal") from None
        try:
            cells = (number(row[header[SAMPLES]]), number(row[header[EXECUTED]]),
                     {r: number(row[header[r]]) for r in reasons})
        except InputError as e:
            raise InputError(f"{path}:{line}: {e}") from None
        insts.append((address, *cells, row[header["Source"]].strip()))
    lines = []
    total = sum(i[1] for i in insts)
    lines.append(f"kernel {name}: {total:,} samples over {len(insts):,} instructions")
    if total == 0:
        lines.append("  no samples (profile with --section SourceCounters)")
        return lines
    by_reason = {r: sum(i[3][r] for i in insts) for r in reasons}
    reason_total = sum(by_reason.values()) or 1
    shares = sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0]))
    lines.append("stall reasons: " + ", ".join(
        f"{r[len('stall_'):]} {100 * n / reason_total:.1f} %" for r, n in shares if n))

    by_count = {}
    for _, samples, executed, _, _ in insts:
        g = by_count.setdefault(executed, [0, 0])
        g[0] += 1
        g[1] += samples
    lines.append("by executions (instructions that ran equally often: one loop body, "
                 "per-tile or per-block code):")
    lines.append(f"  {'executions':>12} {'instructions':>12} {'samples':>9} {'share':>7}")
    ordered = sorted(by_count.items(), key=lambda kv: (-kv[1][1], -kv[0]))
    for executed, (count, samples) in ordered[:groups]:
        lines.append(f"  {executed:>12,} {count:>12,} {samples:>9,} "
                     f"{100 * samples / total:>6.1f}%")

    base = min(i[0] for i in insts)
    lines.append("top instructions (offset from the first, executions, samples, share, "
                 "reasons):")
    ranked = sorted(insts, key=lambda i: (-i[1], i[0]))
    for address, samples, executed, per, source in ranked[:top]:
        if samples == 0:
            break
        main = sorted(((n, r[len("stall_"):]) for r, n in per.items() if n),
                      key=lambda nr: (-nr[0], nr[1]))[:3]
        why = " ".join(f"{r}:{n}" for n, r in main)
        lines.append(f"  {address - base:#07x} {executed:>10,} {samples:>7,} "
                     f"{100 * samples / total:>5.1f}%  {why:<40} {source}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(
        description="Summarise Nsight Compute's warp-state samples per SASS instruction "
                    "(ncu --page source --csv --print-source sass).")
    ap.add_argument("csv", help="the exported source page ('-' for standard input)")
    ap.add_argument("--top", type=int, default=20, help="instructions listed (default 20)")
    ap.add_argument("--groups", type=int, default=10,
                    help="execution-count groups listed (default 10)")
    ap.add_argument("--kernel", default="", help="only the kernels whose name contains this")
    args = ap.parse_args(argv)
    if args.top < 0 or args.groups < 0:
        ap.error("--top and --groups must not be negative")
    try:
        if args.csv == "-":
            rows = list(csv.reader(sys.stdin))
        else:
            with open(args.csv, newline="", encoding="utf-8-sig", errors="replace") as f:
                rows = list(csv.reader(f))
    except OSError as e:
        print(f"ncu_stalls: {args.csv}: {e.strerror}", file=sys.stderr)
        return 1
    try:
        found = kernels(rows, args.csv)
        chosen = [k for k in found if args.kernel in k[0]]
        if not chosen:
            print(f"ncu_stalls: no kernel matches {args.kernel!r} (the file has "
                  + ", ".join(repr(k[0]) for k in found) + ")", file=sys.stderr)
            return 1
        out = []
        for name, header, insts in chosen:
            if out:
                out.append("")
            out += summarise(name, header, insts, args.top, args.groups, args.csv)
    except InputError as e:
        print(f"ncu_stalls: {e}", file=sys.stderr)
        return 1
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
