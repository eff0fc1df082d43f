// config_file.h — reading the files an operator points a binary at (configuration, the
// routing-hint key file): a regular file of bounded size, or a ConfigError that says what
// is wrong. A path to /dev/zero, a FIFO or a huge file must fail at once with a message,
// not grow memory without bound or block start-up where no signal can stop it.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace rtce {

// The size limits, one place: docs/operations.md lists them.
inline constexpr size_t kMaxConfigFileBytes = 1 << 20;    // YAML configuration: 1 MiB
inline constexpr size_t kMaxHintKeyFileBytes = 64 << 10;  // two keys are ~200 bytes

struct ConfigFileText {
  std::string text;
  mode_t mode = 0;  // st_mode, for the permission check of secret files
};

// `what` names the file in messages ("config file", "hint key file"). Throws ConfigError:
// cannot open (with the errno text), not a regular file, larger than max_bytes.
ConfigFileText read_config_file(const std::string& path, std::string_view what, size_t max_bytes);

// A secret (the hint key file) that other users can read or change: the text of a warning,
// or nullopt when the mode is private enough.
std::optional<std::string> secret_file_mode_warning(const std::string& path, std::string_view what,
                                                    mode_t mode);

}  // namespace rtce
