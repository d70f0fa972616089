#!/usr/bin/env python3
"""Checks the quick start's result: C = A @ dequant(B) of programs/paper_matmul_f16_i6.tasm.

    quickstart_check.py A.npy B.npy C.npy M N K

A.npy is A (f16 [M, K], as vm-run saves it: '<f2'), B.npy the i6 weights [K, N] as vm-run saves
sub-byte buffers (packed bytes, 6 bits per element, least significant bit first, two's
complement), C.npy the result (f16 [M, N]). The reference is computed here in double precision
from A and B, with no NumPy and nothing of Tilus VM: C[i][j] = sum_k A[i][k] * B[k][j]. The
program accumulates in f32 and rounds to f16, so an element is right when it is within
1e-2 * |reference| + 1e-3 * sqrt(K) * max|A| * max|B| of it (f16 rounding plus f32 summation
order). Prints one line saying whether C is right; exit 0 right, 1 wrong, 2 unreadable input.
"""
import ast
import math
import struct
import sys


def read_npy(path):
    """(descr, shape, data bytes) of a version 1-3 .npy file."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:6] != b"\x93NUMPY":
        raise ValueError(f"{path}: not a .npy file")
    major = raw[6]
    if major == 1:
        (hlen,) = struct.unpack_from("<H", raw, 8)
        start = 10
    else:
        (hlen,) = struct.unpack_from("<I", raw, 8)
        start = 12
    header = ast.literal_eval(raw[start:start + hlen].decode("latin1"))
    if header.get("fortran_order"):
        raise ValueError(f"{path}: Fortran order is not supported")
    return header["descr"], tuple(header["shape"]), raw[start + hlen:]


def f16_values(path, count):
    descr, _, data = read_npy(path)
    if descr != "<f2":
        raise ValueError(f"{path}: dtype {descr}, expected <f2")
    if len(data) < 2 * count:
        raise ValueError(f"{path}: {len(data) // 2} elements, expected {count}")
    return list(struct.unpack_from(f"<{count}e", data))


def i6_values(path, count):
    _, _, data = read_npy(path)
    if len(data) * 8 < 6 * count:
        raise ValueError(f"{path}: {len(data) * 8 // 6} i6 elements, expected {count}")
    values, acc, held = [], 0, 0  # a little-endian bit stream, consumed 6 bits at a time
    for byte in data:
        acc |= byte << held
        held += 8
        while held >= 6 and len(values) < count:
            v = acc & 0x3F
            acc >>= 6
            held -= 6
            values.append(v - 64 if v & 0x20 else v)
    return values


def main():
    if len(sys.argv) != 7:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    a_path, b_path, c_path = sys.argv[1:4]
    m, n, k = (int(x) for x in sys.argv[4:7])
    try:
        a = f16_values(a_path, m * k)
        b = i6_values(b_path, k * n)
        c = f16_values(c_path, m * n)
    except (OSError, ValueError, SyntaxError, KeyError) as e:
        print(f"check: cannot read the result: {e}", file=sys.stderr)
        return 2
    columns = [b[j::n] for j in range(n)]  # column j of B: B[k][j] for every k
    max_a = max(abs(x) for x in a) or 1.0
    max_b = max(abs(x) for x in b) or 1.0
    slack = 1e-3 * math.sqrt(k) * max_a * max_b
    wrong, worst, first = 0, 0.0, None
    for i in range(m):
        row = a[i * k:(i + 1) * k]
        for j in range(n):
            ref = math.fsum(map(float.__mul__, row, map(float, columns[j])))
            got = c[i * n + j]
            err = abs(got - ref)
            worst = max(worst, err) if not math.isnan(err) else math.inf
            if not err <= 1e-2 * abs(ref) + slack:
                wrong += 1
                if first is None:
                    first = (i, j, got, ref)
    total = m * n
    if wrong:
        i, j, got, ref = first
        print(f"C is WRONG: {wrong} of {total} elements differ from A @ dequant(B) computed here "
              f"(first at [{i}, {j}]: {got} instead of {ref})")
        return 1
    print(f"C is right: all {total} elements match A @ dequant(B) computed here in double "
          f"precision (max abs error {worst:.3g})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
