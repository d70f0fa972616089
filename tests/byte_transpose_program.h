// Byte transposes through shared memory, the B path of programs/gemm/wgmma_fp8.tasm in small:
// 32-bit words loaded along n, viewed as bytes, their slots reordered k fastest by ConvertLayout
// (no data movement) and stored into a tile whose k runs are contiguous, so each stored word
// gathers bytes of several loaded words (the JIT packs them with prmt: jit/pack_bytes.h).
// `transpose4`: 4 k rows per thread, each stored word takes byte j of 4 words (a 4 x 4 byte
// transpose); `transpose8`: 8 k rows (runs of 8 bytes, two words each, as in the GEMM); `rows`:
// no transpose (each stored word is a loaded word). The tile is read back and stored to out:
// out[k, n] = byte n % 4 of w[k, n / 4].
// Shared by the JIT's code-generation test (tests/jit/test_jit_codegen.cpp) and its differential
// test on the GPU (tests/jit/test_jit_gpu.cpp).
#pragma once

namespace tilus::testing {

inline constexpr const char *kByteTransposes = R"(
def transpose4<1>(u32* w_ptr, u8* out_ptr) threads=32:
    w = LoadGlobal(ViewGlobal(w_ptr, shape=[16, 32]), layout=column_spatial(4, 8).local(4, 4))
    t = ConvertLayout(View(w, dtype=u8, layout=column_spatial(4, 8).local(4, 16)), layout=column_spatial(4, 8).column_local(4, 16))
    s = AllocateShared(u8, shape=[16, 128], layout=strided([16, 128], [1, 16]))
    StoreShared(t, s)
    Synchronize()
    StoreGlobal(LoadShared(s, layout=spatial(4, 8).local(4, 16)), ViewGlobal(out_ptr, shape=[16, 128]))

def transpose8<1>(u32* w_ptr, u8* out_ptr) threads=32:
    w = LoadGlobal(ViewGlobal(w_ptr, shape=[32, 32]), layout=column_spatial(4, 8).local(8, 4))
    t = ConvertLayout(View(w, dtype=u8, layout=column_spatial(4, 8).local(8, 16)), layout=column_spatial(4, 8).column_local(8, 16))
    s = AllocateShared(u8, shape=[32, 128], layout=strided([32, 128], [1, 32]))
    StoreShared(t, s)
    Synchronize()
    StoreGlobal(LoadShared(s, layout=spatial(4, 8).local(8, 16)), ViewGlobal(out_ptr, shape=[32, 128]))

def rows<1>(u32* w_ptr, u8* out_ptr) threads=32:
    w = LoadGlobal(ViewGlobal(w_ptr, shape=[16, 32]), layout=spatial(4, 8).local(4, 4))
    s = AllocateShared(u8, shape=[16, 128])
    StoreShared(View(w, dtype=u8, layout=spatial(4, 8).local(4, 16)), s)
    Synchronize()
    StoreGlobal(LoadShared(s, layout=column_spatial(4, 8).local(4, 16)), ViewGlobal(out_ptr, shape=[16, 128]))
)";

} // namespace tilus::testing
