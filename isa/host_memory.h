// How much memory this host can give a run, so that a buffer larger than that is refused with
// a message before it is allocated instead of ending in std::bad_alloc or the OOM killer.
#pragma once

#include <cstdint>

namespace tilus {

/// The memory available to new allocations now: MemAvailable of /proc/meminfo, or, where that
/// cannot be read, the free physical pages (sysconf). Never 0: 1 GiB if neither is known.
uint64_t availableHostMemory();

} // namespace tilus
