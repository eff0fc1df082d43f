// test_support.h — small helpers shared by the wire and relay tests: golden files and hex.
#pragma once

#include <cctype>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace rtce::test {

inline std::string source_path(const std::string& relative) {
  return std::string(RTCE_SOURCE_DIR) + "/" + relative;
}

inline std::vector<uint8_t> from_hex(const std::string& text) {
  std::vector<uint8_t> out;
  std::string digits;
  for (char c : text)
    if (std::isxdigit(static_cast<unsigned char>(c))) digits += c;
  if (digits.size() % 2) throw std::invalid_argument("odd hex length");
  for (size_t i = 0; i < digits.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(digits.substr(i, 2), nullptr, 16)));
  return out;
}

inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The first STUN Binding request headless Chromium sent to an ICE-lite peer whose server
// ufrag is a real hint (tests/golden/README.md).
inline std::vector<uint8_t> chrome_binding_request() {
  return from_hex(read_file(source_path("tests/golden/chrome_binding_request.hex")));
}
inline const char* kChromeServerUfrag = "EQEAAhmWo1ORAxOA";

}  // namespace rtce::test
