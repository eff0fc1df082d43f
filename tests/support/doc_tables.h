// doc_tables.h — reads the Markdown tables of docs/ that list a vocabulary, so tests can
// check a doc against the table in the code that it describes.
#pragma once

#include <fstream>
#include <set>
#include <stdexcept>
#include <string>

namespace rtce::test {

// The labels `name` gives `values` (a set: its size shows whether two values share one).
template <typename E, size_t N>
std::set<std::string> labels_of(const E (&values)[N], const char* (*name)(E)) {
  std::set<std::string> out;
  for (const E v : values) out.insert(name(v));
  return out;
}

// The `code` spans of one line.
inline std::set<std::string> code_spans(const std::string& line) {
  std::set<std::string> out;
  for (size_t open = line.find('`'); open != std::string::npos;) {
    const size_t close = line.find('`', open + 1);
    if (close == std::string::npos) break;
    out.insert(line.substr(open + 1, close - open - 1));
    open = line.find('`', close + 1);
  }
  return out;
}

// The first-column codes (| `code` | ...) of the table that follows the first line starting
// with `heading`.
inline std::set<std::string> doc_table_codes(const std::string& path, const std::string& heading) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::string line;
  while (std::getline(in, line) && line.rfind(heading, 0) != 0) {
  }
  if (!in) throw std::runtime_error(path + ": no line starts with '" + heading + "'");
  std::set<std::string> out;
  bool in_table = false;
  while (std::getline(in, line)) {
    if (line.rfind("|", 0) != 0) {
      if (in_table) break;
      continue;
    }
    in_table = true;
    if (line.rfind("| `", 0) == 0) out.insert(line.substr(3, line.find('`', 3) - 3));
  }
  return out;
}

// The codes in the last cell of the table row whose first cell is `first_cell`.
inline std::set<std::string> doc_row_codes(const std::string& path, const std::string& first_cell) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("| " + first_cell + " |", 0) == 0) {
      const size_t last = line.rfind('|', line.size() - 2);
      return code_spans(line.substr(last));
    }
  throw std::runtime_error(path + ": no table row for " + first_cell);
}

}  // namespace rtce::test
