// process_signals.h — how both binaries take their control signals: SIGTERM and SIGINT
// stop, SIGHUP reloads, all taken synchronously by main() with sigwait, never by a worker.
#pragma once

#include <signal.h>

namespace rtce {

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread and in every thread it starts
// afterwards (call it before any thread exists); returns the set to sigwait on.
inline sigset_t block_control_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return signals;
}

}  // namespace rtce
