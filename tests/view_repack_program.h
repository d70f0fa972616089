// Views that pack 16- and 8-bit slots cut from loaded words back into words (the JIT packs
// each word with prmt: ConversionLowering::packedView, jit/pack_bytes.h). b takes half h of
// words 2 i and 2 i + 1 (i = 0, 1) of each thread's four words, c their 4 x 4 byte transpose,
// d loaded f16 values regrouped like b and e computed halves (both the general path: their
// bytes are not cut from words).
// Shared by the JIT's code-generation test (tests/jit/test_jit_codegen.cpp) and its differential
// test on the GPU (tests/jit/test_jit_gpu.cpp).
#pragma once

namespace tilus::testing {

inline constexpr const char *kViewRepack = R"(
def repack<1>(u32* a_ptr, u32* b_ptr, u32* c_ptr, f16* h_ptr, u32* d_ptr, u32* e_ptr) threads=32:
    w = LoadGlobal(ViewGlobal(a_ptr, shape=[32, 4]), layout=spatial(32, 1).local(1, 4))
    x = ConvertLayout(View(w, dtype=u16, layout=spatial(32, 1, 1).local(1, 4, 2)), layout=spatial(32, 1, 1).local(1, 1, 2).local(1, 4, 1))
    StoreGlobal(View(x, dtype=u32, layout=spatial(32, 1).local(1, 4)), ViewGlobal(b_ptr, shape=[32, 4]))
    y = ConvertLayout(View(w, dtype=u8, layout=spatial(32, 1, 1).local(1, 4, 4)), layout=spatial(32, 1, 1).local(1, 1, 4).local(1, 4, 1))
    StoreGlobal(View(y, dtype=u32, layout=spatial(32, 1).local(1, 4)), ViewGlobal(c_ptr, shape=[32, 4]))
    h = LoadGlobal(ViewGlobal(h_ptr, shape=[32, 4, 2]), layout=spatial(32, 1, 1).local(1, 4, 2))
    hx = ConvertLayout(h, layout=spatial(32, 1, 1).local(1, 1, 2).local(1, 4, 1))
    StoreGlobal(View(hx, dtype=u32, layout=spatial(32, 1).local(1, 4)), ViewGlobal(d_ptr, shape=[32, 4]))
    StoreGlobal(View(Add(x, 1), dtype=u32, layout=spatial(32, 1).local(1, 4)), ViewGlobal(e_ptr, shape=[32, 4]))
)";

} // namespace tilus::testing
