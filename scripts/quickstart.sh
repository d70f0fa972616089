#!/usr/bin/env bash
# Installs what is needed, builds, and runs the Tilus paper's FP16 x INT6 matmul
# (programs/paper_matmul_f16_i6.tasm) on the default device: the GPU when a CUDA driver and
# device are present, else the CPU reference interpreter. Then checks C against A @ dequant(B)
# computed independently (scripts/quickstart_check.py) and says whether it is right; exits 1
# when it is not.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
b="${BUILD_DIR:-build}"
size="${SIZE:-256}"
out="$b/quickstart"
mkdir -p "$out"

"$b/tools/tilus-asm" programs/paper_matmul_f16_i6.tasm -D M="$size" -D N="$size" -D K="$size" \
  -o "$out/paper.tbc"
echo "assembled and checked programs/paper_matmul_f16_i6.tasm (M = N = K = $size) -> $out/paper.tbc"
"$b/tools/vm-run" "$out/paper.tbc" --kernel transform_b \
  --arg b_ptr=rand:1 --arg transformed_b_ptr=zeros --save b_ptr="$out/b.npy" \
  --save transformed_b_ptr="$out/tb.npy"
"$b/tools/vm-run" "$out/paper.tbc" --kernel matmul \
  --arg a_ptr=rand:2 --arg transformed_b_ptr=@"$out/tb.npy" --arg c_ptr=zeros \
  --save a_ptr="$out/a.npy" --save c_ptr="$out/c.npy"
echo "C = A @ dequant(B) written to $out/c.npy; checking it against a reference computed here"
python3 scripts/quickstart_check.py "$out/a.npy" "$out/b.npy" "$out/c.npy" "$size" "$size" "$size"
