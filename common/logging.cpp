// logging.cpp — see logging.h.
#include "logging.h"

#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

namespace rtce {

void setup_logging(const std::string& format, const std::string& level) {
  auto logger = spdlog::stderr_logger_mt("rtcedge");
  if (format == "json")
    // Messages are written by us and never contain raw client bytes; quotes are avoided.
    logger->set_pattern(R"({"ts":"%Y-%m-%dT%H:%M:%S.%fZ","level":"%l","thread":%t,"msg":"%v"})",
                        spdlog::pattern_time_type::utc);
  else
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ [%t] %v");
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace rtce
