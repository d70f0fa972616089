// The host's available memory (see host_memory.h).
#include "isa/host_memory.h"

#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace tilus {

uint64_t availableHostMemory() {
  if (std::FILE *f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f))
      found = std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1;
    std::fclose(f);
    if (found && kib > 0)
      return uint64_t(kib) * 1024;
  }
  long pages = ::sysconf(_SC_AVPHYS_PAGES);
  long pageSize = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && pageSize > 0)
    return uint64_t(pages) * uint64_t(pageSize);
  return uint64_t(1) << 30;
}

} // namespace tilus
