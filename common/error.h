// error.h — the one exception type for bad configuration and bad operator input.
// Its message always names what was wrong (the key, flag or file) and why.
#pragma once

#include <stdexcept>
#include <string>

namespace rtce {

class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace rtce
