// realtime_dialect.cpp — see realtime_dialect.h.
#include "realtime_dialect.h"

#include <speex/speex_resampler.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <stdexcept>

#include "backend_protocol.h"

namespace rtce {

static_assert(std::endian::native == std::endian::little, "PCM16 LE goes on the wire in host order");

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// 0..63 for alphabet characters, 64 for '=', 255 for anything else.
constexpr std::array<uint8_t, 256> kDecode = [] {
  std::array<uint8_t, 256> table{};
  table.fill(255);
  for (uint8_t i = 0; i < 64; ++i) table[static_cast<uint8_t>(kAlphabet[i])] = i;
  table['='] = 64;
  return table;
}();

// Speex quality 4 (its default): transparent for speech at a few MFLOP/s per stream.
constexpr int kResamplerQuality = SPEEX_RESAMPLER_QUALITY_DEFAULT;

const char* const kErrorNames[] = {RTCE_REALTIME_DIALECT_ERRORS(RTCE_VOCAB_MESSAGE_LABEL)};
const char* const kErrorMessages[] = {RTCE_REALTIME_DIALECT_ERRORS(RTCE_VOCAB_MESSAGE_TEXT)};

std::string dump(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// The transceiver transcodes the caller's audio to PCM16 24 kHz and back, so the backend
// must use exactly that whatever the client asked for.
nlohmann::json pin_audio_formats(nlohmann::json session) {
  if (!session.is_object()) session = nlohmann::json::object();
  if (!session.contains("type")) session["type"] = "realtime";
  nlohmann::json& audio = session["audio"];
  if (!audio.is_object()) audio = nlohmann::json::object();
  for (const char* direction : {"input", "output"}) {
    nlohmann::json& side = audio[direction];
    if (!side.is_object()) side = nlohmann::json::object();
    side["format"] = {{"type", "audio/pcm"}, {"rate", kRealtimeSampleRate}};
  }
  return session;
}

RealtimeInbound invalid(RealtimeDialectError error) {
  return {.kind = RealtimeInboundKind::invalid, .error = error};
}

}  // namespace

std::string_view realtime_dialect_error_name(RealtimeDialectError error) {
  return vocab_name(kErrorNames, error);
}
std::string_view realtime_dialect_error_message(RealtimeDialectError error) {
  return vocab_name(kErrorMessages, error);
}

void base64_append(std::span<const uint8_t> bytes, std::string& out) {
  size_t at = out.size();
  out.resize(at + (bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = uint32_t{bytes[i]} << 16 | uint32_t{bytes[i + 1]} << 8 | bytes[i + 2];
    out[at++] = kAlphabet[v >> 18];
    out[at++] = kAlphabet[(v >> 12) & 63];
    out[at++] = kAlphabet[(v >> 6) & 63];
    out[at++] = kAlphabet[v & 63];
  }
  if (size_t left = bytes.size() - i; left > 0) {
    uint32_t v = uint32_t{bytes[i]} << 16 | (left == 2 ? uint32_t{bytes[i + 1]} << 8 : 0);
    out[at++] = kAlphabet[v >> 18];
    out[at++] = kAlphabet[(v >> 12) & 63];
    out[at++] = left == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out[at++] = '=';
  }
}

bool base64_decode(std::string_view text, std::vector<uint8_t>& out) {
  out.clear();
  if (text.size() % 4 != 0) return false;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint8_t c[4];
    for (size_t k = 0; k < 4; ++k) c[k] = kDecode[static_cast<uint8_t>(text[i + k])];
    const bool last = i + 4 == text.size();
    // '=' only at the end, as the last one or two characters, and never "x==y".
    if (c[0] > 63 || c[1] > 63) return false;
    if (c[2] == 64 && (c[3] != 64 || !last)) return false;
    if (c[3] == 64 && !last) return false;
    if (c[2] == 255 || c[3] == 255) return false;
    uint32_t v = uint32_t{c[0]} << 18 | uint32_t{c[1]} << 12 | (c[2] & 63u) << 6 | (c[3] & 63u);
    out.push_back(static_cast<uint8_t>(v >> 16));
    if (c[2] != 64) out.push_back(static_cast<uint8_t>(v >> 8));
    if (c[3] != 64) out.push_back(static_cast<uint8_t>(v));
  }
  return true;
}

struct Resampler::State {
  SpeexResamplerState* speex = nullptr;
  ~State() {
    if (speex) speex_resampler_destroy(speex);
  }
};

Resampler::Resampler(int in_rate, int out_rate) : in_rate_(in_rate), out_rate_(out_rate) {
  if (in_rate == out_rate) return;
  state_ = std::make_unique<State>();
  int err = 0;
  state_->speex = speex_resampler_init(1, static_cast<spx_uint32_t>(in_rate),
                                       static_cast<spx_uint32_t>(out_rate), kResamplerQuality, &err);
  // Only bad arguments or out of memory fail here; both are programming errors.
  if (!state_->speex) throw std::runtime_error("speex_resampler_init failed: " + std::to_string(err));
}

Resampler::~Resampler() = default;

void Resampler::process(std::span<const int16_t> in, std::vector<int16_t>& out) {
  if (!state_) {
    out.insert(out.end(), in.begin(), in.end());
    return;
  }
  while (!in.empty()) {
    // Room for all of it (plus the filter's fractional phase); speex says what it used.
    const size_t room = in.size() * static_cast<size_t>(out_rate_) / static_cast<size_t>(in_rate_) + 8;
    const size_t at = out.size();
    out.resize(at + room);
    auto in_len = static_cast<spx_uint32_t>(in.size());
    auto out_len = static_cast<spx_uint32_t>(room);
    speex_resampler_process_int(state_->speex, 0, in.data(), &in_len, out.data() + at, &out_len);
    out.resize(at + out_len);
    if (in_len == 0 && out_len == 0) break;  // cannot happen with room > 0; never spin
    in = in.subspan(std::min<size_t>(in_len, in.size()));
  }
}

void Resampler::flush(std::vector<int16_t>& out) {
  if (!state_) return;
  // Bounded: the delay of any quality speex has is well under 20 ms at 48 kHz.
  static constexpr size_t kMaxLatency = 1024;
  const auto latency =
      std::min<size_t>(static_cast<size_t>(speex_resampler_get_input_latency(state_->speex)), kMaxLatency);
  static constexpr std::array<int16_t, kMaxLatency> kSilence{};
  process(std::span<const int16_t>(kSilence).first(latency), out);
  reset();
}

void Resampler::reset() {
  if (state_) speex_resampler_reset_mem(state_->speex);
}

RealtimeDialect::RealtimeDialect(int sample_rate)
    : frame_samples_(pcm_frame_bytes(sample_rate) / 2),
      up_(sample_rate, kRealtimeSampleRate),
      down_(kRealtimeSampleRate, sample_rate) {
  // The connection checks the rate before it builds a dialect; anything else is a bug.
  if (frame_samples_ == 0)
    throw std::invalid_argument("realtime dialect: bad sample rate " + std::to_string(sample_rate));
  up_scratch_.reserve(kRealtimeSampleRate / 50 + 16);
  pending_.reserve(frame_samples_ * 2);
}

std::string RealtimeDialect::session_update(const nlohmann::json& session_config) const {
  return dump({{"type", "session.update"}, {"session", pin_audio_formats(session_config)}});
}

bool RealtimeDialect::encode_audio(std::span<const int16_t> pcm_20ms, std::string& out) {
  up_scratch_.clear();
  up_.process(pcm_20ms, up_scratch_);
  out.clear();
  if (up_scratch_.empty()) return false;
  static constexpr std::string_view kHead = R"({"type":"input_audio_buffer.append","audio":")";
  out.append(kHead);
  base64_append({reinterpret_cast<const uint8_t*>(up_scratch_.data()), up_scratch_.size() * 2}, out);
  out.append("\"}");
  return true;
}

std::string RealtimeDialect::encode_event(const nlohmann::json& event) const {
  auto type = event.find("type");
  if (type != event.end() && *type == "session.update") {
    if (auto session = event.find("session"); session != event.end() && session->is_object()) {
      nlohmann::json pinned = event;
      pinned["session"] = pin_audio_formats(*session);
      return dump(pinned);
    }
  }
  return dump(event);
}

RealtimeInbound RealtimeDialect::decode_text(std::string_view text) {
  ready_.clear();
  // The lexer rejects invalid UTF-8, so whatever parses can be dumped again safely.
  nlohmann::json event = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (event.is_discarded()) return invalid(RealtimeDialectError::not_json);
  if (!event.is_object()) return invalid(RealtimeDialectError::not_an_event);
  auto type = event.find("type");
  if (type == event.end() || !type->is_string() || type->get_ref<const std::string&>().empty())
    return invalid(RealtimeDialectError::not_an_event);
  const std::string& name = type->get_ref<const std::string&>();

  if (name == "response.output_audio.delta" || name == "response.audio.delta") {
    auto delta = event.find("delta");
    if (delta == event.end() || !delta->is_string() ||
        !base64_decode(delta->get_ref<const std::string&>(), delta_bytes_))
      return invalid(RealtimeDialectError::bad_delta);
    if (delta_bytes_.size() % 2 != 0) return invalid(RealtimeDialectError::odd_delta);
    delta_pcm_.resize(delta_bytes_.size() / 2);
    if (!delta_bytes_.empty()) std::memcpy(delta_pcm_.data(), delta_bytes_.data(), delta_bytes_.size());
    down_.process(delta_pcm_, pending_);
    const size_t frames = pending_.size() / frame_samples_;
    const auto whole = static_cast<std::ptrdiff_t>(frames * frame_samples_);
    ready_.assign(pending_.begin(), pending_.begin() + whole);
    pending_.erase(pending_.begin(), pending_.begin() + whole);
    return {.kind = RealtimeInboundKind::audio, .frames = frames};
  }
  RealtimeInbound out;
  out.kind =
      name == "input_audio_buffer.speech_started" ? RealtimeInboundKind::clear : RealtimeInboundKind::event;
  out.event = std::move(event);
  return out;
}

std::span<const int16_t> RealtimeDialect::frame(size_t i) const {
  return std::span<const int16_t>(ready_).subspan(i * frame_samples_, frame_samples_);
}

}  // namespace rtce
