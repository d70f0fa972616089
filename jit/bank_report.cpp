#include "jit/bank_report.h"

#include <algorithm>
#include <map>
#include <set>

namespace tilus::jit {

int64_t sharedWavefronts(const std::vector<int64_t> &addresses, int bytes, int64_t *ideal) {
  int lanesPerPhase = bytes >= 4 ? std::max(1, 128 / bytes) : 32;
  int64_t total = 0, best = 0;
  for (size_t first = 0; first < addresses.size(); first += size_t(lanesPerPhase)) {
    std::map<int64_t, std::set<int64_t>> banks; // bank -> distinct 4-byte words
    std::set<int64_t> words;
    for (size_t i = first; i < std::min(addresses.size(), first + size_t(lanesPerPhase)); ++i) {
      if (addresses[i] < 0) // the lane does not take part
        continue;
      // the 4-byte words the access touches (a narrower access lies within one word)
      for (int64_t w = addresses[i] / 4; w <= (addresses[i] + std::max(bytes, 1) - 1) / 4; ++w) {
        banks[w % 32].insert(w);
        words.insert(w);
      }
    }
    int64_t phase = 0;
    for (const auto &[bank, ws] : banks)
      phase = std::max(phase, int64_t(ws.size()));
    total += phase;
    best += (int64_t(words.size()) + 31) / 32;
  }
  if (ideal)
    *ideal = best;
  return total;
}

SharedAccessReport analyseSharedAccess(const SharedLayout &root, int64_t rootByteOffset, DataType t,
                                       const std::vector<int64_t> &origin,
                                       const std::vector<int32_t> &dims, const LayoutMap &map,
                                       const std::vector<SlotGroup> &groups, bool primaryOnly) {
  SharedAccessReport r;
  r.accesses = int64_t(groups.size());
  int bits = t.storageBits();
  if (bits < 8) {
    r.wavefronts = r.ideal = -1;
    return r;
  }
  int64_t lanes = std::min<int64_t>(32, map.threads());
  std::vector<int64_t> local(size_t(map.rank()));
  for (const SlotGroup &g : groups) {
    int bytes = int(g.count) * bits / 8;
    r.bytes = std::max(r.bytes, bytes);
    std::vector<int64_t> addresses(size_t(lanes), -1);
    for (int64_t lane = 0; lane < lanes; ++lane) {
      if (primaryOnly && !map.isPrimary(lane))
        continue;
      map.apply(lane, g.first, local.data());
      std::vector<int64_t> index = origin;
      for (size_t k = 0; k < dims.size(); ++k)
        index[size_t(dims[k])] += local[k];
      addresses[size_t(lane)] = rootByteOffset + root.offset(index) * bits / 8;
    }
    int64_t ideal = 0;
    r.wavefronts += sharedWavefronts(addresses, bytes, &ideal);
    r.ideal += ideal;
  }
  return r;
}

} // namespace tilus::jit
