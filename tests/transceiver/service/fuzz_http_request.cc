// fuzz_http_request.cc — libFuzzer target for the signaling server's request path without a
// socket: bytes through parse_http_request (the Beast parser with HttpServer's default
// limits, as every connection reads), pipelined requests one after another, then the header
// parsing every route does (Authorization, Content-Type, If-Match) and the Realtime routes
// (RealtimeSignaling: /v1/realtime/calls[/rtc_<id>[/hangup]], client_secrets, sessions,
// multipart offers, JSON session configs) with hooks that answer at once.
// Invariants: a refusal is 400/413/414/431; every request under /v1/realtime gets exactly one
// response with a status in 100..599; credentials are a non-empty part of the header.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "http_server.h"
#include "realtime_signaling.h"

namespace {

using namespace rtce;

// Requests with "Bearer sk" pass as a server key, so the fuzzer reaches the routes behind it.
constexpr std::string_view kServerKey = "sk";
constexpr std::string_view kCallId = "0a0123456789abcdef0123456789abcd";

RealtimeHooks hooks() {
  RealtimeHooks h;
  h.server_key_ok = [](const HttpRequest& r) {
    const auto credentials = credentials_for_scheme(r.header("authorization"), "Bearer");
    return credentials && *credentials == kServerKey;
  };
  h.server_principal = [](const HttpRequest&) { return std::string("s:fuzz"); };
  h.admit = []() -> std::optional<RealtimeError> { return std::nullopt; };
  h.place = [](const RealtimeOffer& offer, std::function<void(PlaceResult)> done) {
    if (!offer.sdp.starts_with("v=0")) return done(PlaceRefusal{RealtimeError::invalid_offer, "not SDP"});
    done(PlacedCall{std::string(kCallId), "v=0\r\n"});
  };
  h.session_request = [](const std::string&, const std::string&, const HttpRequest&,
                         HttpServer::Responder respond) { respond(HttpResponse::json(200, "{}")); };
  h.hang_up = [](const std::string& id, const std::string&, std::function<void(bool)> done) {
    done(id == kCallId);
  };
  h.attach_sideband = [](const std::string& id, const std::string&, const HttpRequest&,
                         HttpServer::Responder respond) {
    respond(id == kCallId ? HttpResponse::accept_websocket({})
                          : realtime_error_response(RealtimeError::call_not_found));
  };
  h.unix_now = [] { return int64_t{1'700'000'000}; };
  return h;
}

RealtimeSignaling& signaling() {
  static RealtimeSignaling s(EphemeralKeyring({{"k1", std::string(40, 's')}}), 60, 64 * 1024, hooks());
  return s;
}

void check_headers(const HttpRequest& request) {
  const std::string_view authorization = request.header("authorization");
  if (auto credentials = credentials_for_scheme(authorization, "Bearer")) {
    if (credentials->empty() || credentials->data() < authorization.data() ||
        credentials->data() + credentials->size() > authorization.data() + authorization.size())
      std::abort();
  }
  const std::string_view content_type = request.header("content-type");
  for (std::string_view type :
       {"application/sdp", "multipart/form-data", "application/trickle-ice-sdpfrag", "application/json"})
    if (media_type_is(content_type, type) && content_type.size() < type.size()) std::abort();
  // If-Match as a PATCH reads it: surrounding blanks trimmed.
  std::string if_match(request.header("if-match"));
  if_match.erase(0, if_match.find_first_not_of(" \t"));
  if_match.erase(if_match.find_last_not_of(" \t") + 1);
  if (!if_match.empty() && (if_match.front() == ' ' || if_match.back() == '\t')) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const HttpServer::Limits limits;
  // A connection reads requests until one is refused or the bytes run out.
  for (int requests = 0; requests < 16 && !bytes.empty(); ++requests) {
    HttpParseResult parsed = parse_http_request(bytes, limits);
    if (parsed.consumed > bytes.size()) std::abort();
    if (parsed.refusal) {
      const unsigned s = parsed.refusal->status;
      if (s != 400 && s != 413 && s != 414 && s != 431) std::abort();
      return 0;
    }
    if (!parsed.request) return 0;  // the bytes end inside a request: the server waits for more
    const HttpRequest& request = *parsed.request;
    if (request.body.size() > limits.max_body_bytes) std::abort();
    check_headers(request);
    int responses = 0;
    unsigned status = 0;
    const bool handled = signaling().handle(request, [&](HttpResponse response) {
      ++responses;
      status = response.status;
    });
    if (handled && (responses != 1 || status < 100 || status > 599)) std::abort();
    if (!handled && responses != 0) std::abort();
    if (parsed.consumed == 0) return 0;
    bytes.remove_prefix(parsed.consumed);
  }
  return 0;
}
