// hint_tool.cpp — see hint_tool.h.
#include "hint_tool.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "error.h"
#include "hint_keys.h"

namespace rtce {

HintTool::HintTool(CLI::App& app) {
  hint_ = app.add_subcommand("hint", "routing-hint keys and ufrags (docs/wire-format.md)");
  keygen_ = hint_->add_subcommand("keygen", "print a new key file (YAML) to stdout");
  keygen_->add_option("--id", key_id_, "key id 0..15 (use a new id when rotating)")->check(CLI::Range(0, 15));
  encode_ = hint_->add_subcommand("encode", "print a fresh server ufrag carrying a routing hint");
  encode_->add_option("--key-file", key_file_, "key file; its first key signs")->required();
  encode_->add_option("--cluster", cluster_, "cluster id 0..255")->required()->check(CLI::Range(0, 255));
  encode_->add_option("--endpoint", endpoint_, "transceiver endpoint id 0..65535")
      ->required()
      ->check(CLI::Range(0, 65535));
  decode_ = hint_->add_subcommand(
      "decode", "print a ufrag's hint fields as JSON; exit 0 if its MAC verifies, 1 if not");
  decode_->add_option("--key-file", key_file_, "key file; any listed key verifies")->required();
  decode_->add_option("ufrag", ufrag_, "server ufrag (or a whole USERNAME 'server:client')")->required();
  hint_->require_subcommand(1);
}

int HintTool::run_selected() {
  if (!hint_->parsed()) return -1;
  try {
    if (keygen_->parsed()) {
      std::cout << HintKeys::generate(static_cast<uint8_t>(key_id_)).to_yaml();
      return 0;
    }
    const HintKeys keys = HintKeys::load_file(key_file_);
    if (encode_->parsed()) {
      std::cout << mint_ufrag(keys, static_cast<uint8_t>(cluster_), static_cast<uint16_t>(endpoint_)) << "\n";
      return 0;
    }
    std::string ufrag = ufrag_.substr(0, ufrag_.find(':'));
    const rtce_hint_keyset keyset = keys.keyset();
    rtce_hint hint{};
    const rtce_hint_result r = rtce_hint_open(reinterpret_cast<const uint8_t*>(ufrag.data()),
                                              static_cast<uint32_t>(ufrag.size()), &keyset, &hint);
    nlohmann::json out;
    out["ufrag"] = ufrag;
    out["valid"] = r == RTCE_HINT_OK;
    out["result"] = hint_result_name(r);
    if (r != RTCE_HINT_BAD_LENGTH && r != RTCE_HINT_BAD_CHAR) {
      out["version"] = hint.version;
      out["key_id"] = hint.key_id;
      out["cluster_id"] = hint.cluster_id;
      out["endpoint_id"] = hint.endpoint_id;
      out["nonce"] = hint.nonce;
      char mac[11];
      std::snprintf(mac, sizeof mac, "0x%08x", hint.mac);
      out["mac"] = mac;
    }
    std::cout << out.dump() << "\n";
    return r == RTCE_HINT_OK ? 0 : 1;
  } catch (const ConfigError& e) {
    std::cerr << "rtcedge-relay hint: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace rtce
