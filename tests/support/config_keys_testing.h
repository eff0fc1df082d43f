// config_keys_testing.h — what the relay's and the transceiver's config tests share: the
// YAML that --check-config prints names every key of the binary's table.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "config_keys.h"

namespace rtce::test {

template <class C>
void expect_every_key_in(const std::string& yaml, const ConfigTable<C>& table) {
  for (const auto& k : table) {
    const std::string leaf = k.name.substr(k.name.rfind('.') + 1);
    EXPECT_NE(yaml.find(leaf + ": "), std::string::npos) << k.name << " missing from\n" << yaml;
  }
}

}  // namespace rtce::test
