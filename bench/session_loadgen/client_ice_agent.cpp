// client_ice_agent.cpp — see client_ice_agent.h.
#include "client_ice_agent.h"

#include <algorithm>

namespace rtce::loadgen {

std::optional<ClientProfile> parse_client_profile(std::string_view name) {
  if (name == "browser") return ClientProfile::browser;
  if (name == "pion") return ClientProfile::pion;
  return std::nullopt;
}

std::optional<ConsentChecks> parse_consent_checks(std::string_view name) {
  if (name == "periodic") return ConsentChecks::periodic;
  if (name == "none") return ConsentChecks::none;
  if (name == "on-silence") return ConsentChecks::on_silence;
  return std::nullopt;
}

const char* to_string(ClientProfile profile) {
  switch (profile) {
    case ClientProfile::browser: return "browser";
    case ClientProfile::pion: return "pion";
  }
  return "?";
}

const char* to_string(ConsentChecks consent) {
  switch (consent) {
    case ConsentChecks::periodic: return "periodic";
    case ConsentChecks::none: return "none";
    case ConsentChecks::on_silence: return "on-silence";
  }
  return "?";
}

ClientIceAgent::ClientIceAgent(ClientProfile profile, ConsentChecks consent, ClientIceTiming timing)
    : profile_(profile), consent_(consent), timing_(timing) {}

ClientIceAgent::Check ClientIceAgent::start(Nanos now) {
  last_traffic_at_ = now;
  return next_check(now);
}

ClientIceAgent::Check ClientIceAgent::next_check(Nanos now) {
  Check check;
  check.controlling = controlling_;
  // Only the controlling agent nominates. The browser nominates with every check
  // (aggressive-like); pion only once its pair has succeeded, and its consent checks after
  // that carry no USE-CANDIDATE.
  if (profile_ == ClientProfile::browser)
    check.use_candidate = controlling_;
  else
    check.use_candidate = controlling_ && pair_succeeded() && !connected();
  last_check_nominated_ = check.use_candidate;
  last_check_at_ = now;
  if (connected()) {
    ++checks_after_connected_;
    schedule_after_connected(now);
  } else {
    next_check_at_ =
        now + (profile_ == ClientProfile::browser ? timing_.check_retransmit : timing_.check_tick);
  }
  return check;
}

void ClientIceAgent::schedule_after_connected(Nanos from) {
  switch (consent_) {
    case ConsentChecks::periodic: next_check_at_ = from + timing_.consent_interval; break;
    case ConsentChecks::none: next_check_at_ = INT64_MAX; break;
    case ConsentChecks::on_silence:
      next_check_at_ = std::max(from, last_traffic_at_) + timing_.silence_before_check;
      break;
  }
}

std::optional<ClientIceAgent::Check> ClientIceAgent::poll(Nanos now) {
  if (now < next_check_at_) return std::nullopt;
  // Traffic since the deadline was set postpones an on-silence check rather than sending one.
  if (connected() && consent_ == ConsentChecks::on_silence &&
      now - last_traffic_at_ < timing_.silence_before_check) {
    schedule_after_connected(last_check_at_);
    return std::nullopt;
  }
  return next_check(now);
}

void ClientIceAgent::on_check_success(Nanos now) {
  if (!pair_succeeded()) succeeded_at_ = now;
  if (connected()) return;
  // pion: a success that did not nominate leaves the next tick (already scheduled) to nominate.
  if (profile_ == ClientProfile::browser || last_check_nominated_) {
    connected_at_ = now;
    schedule_after_connected(now);
  }
}

std::optional<ClientIceAgent::Check> ClientIceAgent::on_role_conflict_response(Nanos now) {
  controlling_ = !controlling_;
  return next_check(now);
}

std::optional<ClientIceAgent::Check> ClientIceAgent::on_peer_request(Nanos now) {
  // pion/ice's controlling selector: a Binding request on a pair that already succeeded,
  // with nothing nominated yet, nominates that pair now instead of on the next tick.
  if (profile_ != ClientProfile::pion || !controlling_ || !pair_succeeded() || connected() ||
      last_check_nominated_)
    return std::nullopt;
  return next_check(now);
}

}  // namespace rtce::loadgen
