// cpu_affinity.cpp — see cpu_affinity.h.
#include "cpu_affinity.h"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <cstring>

namespace rtce {

int worker_cpu(unsigned index, const cpu_set_t& allowed) {
  const int count = CPU_COUNT(&allowed);
  if (count <= 0) return -1;
  int want = static_cast<int>(index % static_cast<unsigned>(count));
  for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (want-- == 0) return cpu;
  }
  return -1;
}

int pin_current_thread(unsigned index, std::string_view who) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  // sched_getaffinity(0) reads the calling thread's mask, which it inherited from the
  // thread that created it: the process's allowed set unless someone narrowed it since.
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    spdlog::warn("{}: cannot read the allowed CPUs ({}); running unpinned", who, std::strerror(errno));
    return -1;
  }
  const int cpu = worker_cpu(index, allowed);
  if (cpu < 0) {
    spdlog::warn("{}: no allowed CPU to pin to; running unpinned", who);
    return -1;
  }
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (const int err = pthread_setaffinity_np(pthread_self(), sizeof one, &one); err != 0) {
    spdlog::warn("{}: could not pin to CPU {} ({}); running unpinned", who, cpu, std::strerror(err));
    return -1;
  }
  return cpu;
}

}  // namespace rtce
