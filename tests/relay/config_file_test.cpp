// config_file_test.cpp — the files operators point the binaries at (issue 15 items 7, 8):
// only bounded regular files are read, errors carry the errno text, unknown key-file
// fields are refused, and a key file others can read or write is warned about.
#include "config_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <future>

#include "config_layers.h"
#include "error.h"
#include "hint_keys.h"

namespace rtce {
namespace {

using namespace std::chrono_literals;

class ConfigFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/rtce-config-file-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    if (!dir_.empty()) {
      [[maybe_unused]] const int rc = std::system(("rm -rf '" + dir_ + "'").c_str());
    }
  }
  std::string write(const std::string& name, const std::string& text, mode_t mode = 0600) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path) << text;
    ::chmod(path.c_str(), mode);
    return path;
  }
  // The ConfigError text of a read that must fail, with a deadline: a hang is a failure.
  static std::string error_of(std::function<void()> read) {
    auto result = std::async(std::launch::async, [read] {
      try {
        read();
      } catch (const ConfigError& e) {
        return std::string(e.what());
      }
      return std::string("no error");
    });
    if (result.wait_for(3s) != std::future_status::ready) {
      ADD_FAILURE() << "the read did not return within 3 s";
      std::_Exit(1);  // a thread blocked in read() cannot be joined
    }
    return result.get();
  }
  std::string dir_;
};

const std::string kKeys = "keys:\n  - id: 1\n    secret: 00112233445566778899aabbccddeeff\n";

TEST_F(ConfigFiles, RegularFilesWithinTheBoundAreRead) {
  const auto file = read_config_file(write("ok.yaml", kKeys, 0640), "hint key file", kMaxHintKeyFileBytes);
  EXPECT_EQ(file.text, kKeys);
  EXPECT_EQ(file.mode & 0777, 0640u);
  const std::string exact(kMaxHintKeyFileBytes, '#');
  EXPECT_EQ(read_config_file(write("exact", exact), "f", kMaxHintKeyFileBytes).text.size(), exact.size());
}

TEST_F(ConfigFiles, DevicesFifosDirectoriesAndLargeFilesAreRefusedAtOnce) {
  auto read = [](std::string path, size_t max) {
    return [path, max] { read_config_file(path, "hint key file", max); };
  };
  EXPECT_EQ(error_of(read("/dev/zero", kMaxHintKeyFileBytes)),
            "hint key file '/dev/zero': is a character device; expected a regular file");
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(error_of(read(fifo, kMaxHintKeyFileBytes)).find("is a FIFO"), std::string::npos)
      << "a FIFO without a writer must not block the open";
  EXPECT_NE(error_of(read(dir_, kMaxHintKeyFileBytes)).find("is a directory"), std::string::npos);
  const std::string big = write("big", std::string(kMaxHintKeyFileBytes + 1, '#'));
  EXPECT_EQ(error_of(read(big, kMaxHintKeyFileBytes)),
            "hint key file '" + big + "': is 65537 bytes, too large (the limit is 65536 bytes)");
  EXPECT_EQ(error_of(read(dir_ + "/missing", 10)),
            "hint key file '" + dir_ + "/missing': cannot open: No such file or directory");
}

TEST_F(ConfigFiles, ConfigLayersUseTheSameBoundAndSayWhyAFileCannotBeOpened) {
  ConfigLayers layers("RTCEDGE_TEST_");
  EXPECT_EQ(error_of([&] { layers.load_yaml_file(dir_ + "/nope.yaml"); }),
            "config file '" + dir_ + "/nope.yaml': cannot open: No such file or directory");
  EXPECT_NE(error_of([&] { layers.load_yaml_file("/dev/zero"); }).find("is a character device"),
            std::string::npos);
  const std::string big = write("big.yaml", std::string(kMaxConfigFileBytes + 1, '#'));
  EXPECT_NE(error_of([&] { layers.load_yaml_file(big); }).find("too large (the limit is 1048576 bytes)"),
            std::string::npos);
}

TEST_F(ConfigFiles, KeyFilesRefuseUnknownFields) {
  auto error = [&](const std::string& text) {
    const std::string path = write("k.yaml", text);
    return error_of([path] { HintKeys::load_file(path); });
  };
  EXPECT_NE(
      error(kKeys + "    sercet: typo\n").find("keys[0]: unknown field 'sercet' (expected 'id', 'secret')"),
      std::string::npos);
  EXPECT_NE(error(kKeys + "rotation: weekly\n").find("unknown field 'rotation' (expected 'keys')"),
            std::string::npos);
  EXPECT_NE(error("keys:\n  - id: 1\n    secret: [1, 2]\n").find("keys[0].secret: must be 32 hex"),
            std::string::npos);
}

TEST_F(ConfigFiles, KeyFilesOthersCanReadOrWriteAreWarnedAbout) {
  auto warnings_for = [&](mode_t mode) {
    std::vector<std::string> warnings;
    HintKeys::load_file(write("keys.yaml", kKeys, mode), &warnings);
    return warnings;
  };
  EXPECT_TRUE(warnings_for(0600).empty());
  EXPECT_TRUE(warnings_for(0640).empty()) << "a group of services may read it";
  const auto world = warnings_for(0644);
  ASSERT_EQ(world.size(), 1u);
  EXPECT_NE(world[0].find("is readable by every user (mode 0644)"), std::string::npos) << world[0];
  const auto group_writable = warnings_for(0660);
  ASSERT_EQ(group_writable.size(), 1u);
  EXPECT_NE(group_writable[0].find("writable by other users (mode 0660)"), std::string::npos);
  EXPECT_EQ(warnings_for(0666).size(), 1u);
}

}  // namespace
}  // namespace rtce
