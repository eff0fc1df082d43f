// cpu_affinity.h — pinning a worker thread to one CPU: the relay's UDP workers and the
// transceiver's media workers. Only CPUs in the process's allowed mask are chosen (a
// container's cpuset, taskset), so worker N runs on the Nth allowed CPU, wrapping; when
// pinning fails the worker says so and runs unpinned rather than not at all.
#pragma once

#include <sched.h>

#include <string_view>

namespace rtce {

// The CPU worker `index` belongs on: the (index mod count)-th CPU set in `allowed`, or -1
// when `allowed` is empty.
int worker_cpu(unsigned index, const cpu_set_t& allowed);

// Pins the calling thread to worker_cpu(index, the calling thread's allowed mask). Returns
// the CPU, or -1 after a warning naming `who` when the mask cannot be read or the kernel
// refuses the pin.
int pin_current_thread(unsigned index, std::string_view who);

}  // namespace rtce
