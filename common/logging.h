// logging.h — process-wide spdlog setup: human text or one JSON object per line.
#pragma once

#include <string>

namespace rtce {

// format: "text" | "json"; level: trace | debug | info | warn | error.
void setup_logging(const std::string& format, const std::string& level);

}  // namespace rtce
