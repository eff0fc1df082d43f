// hint_tool.h — `rtcedge-relay hint keygen|encode|decode`: the operator's view of the
// routing hint. Exit codes: 0 success (decode: MAC verifies), 1 decode: MAC does not
// verify, 2 bad usage or input.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace rtce {

// Registers the `hint` subcommand tree on app; run_selected runs whichever was chosen and
// returns the process exit code, or -1 when no hint subcommand was selected.
class HintTool {
 public:
  explicit HintTool(CLI::App& app);
  int run_selected();

 private:
  CLI::App* hint_ = nullptr;
  CLI::App* keygen_ = nullptr;
  CLI::App* encode_ = nullptr;
  CLI::App* decode_ = nullptr;
  int key_id_ = 1;
  std::string key_file_;
  int cluster_ = -1;
  int endpoint_ = -1;
  std::string ufrag_;
};

}  // namespace rtce
