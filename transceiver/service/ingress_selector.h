// ingress_selector.h — which relay VIPs a session's answer names, for the global relay
// (docs/global-relay.md): clients enter at the ingress relay nearest to them, and the owning
// transceiver's answer must name that ingress's VIP. The region comes from a request header
// set by a geo-aware front door, else from the client's address, else the session uses this
// cluster's own relay.vips. Socket-free; built once from the configuration.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "net_address.h"
#include "vocab.h"

namespace rtce {

// How the ingress was chosen; the label of rtcedge_transceiver_ingress_selected_total.
#define RTCE_INGRESS_CHOICES(X)                                         \
  X(header, "the front door's region header named a configured region") \
  X(source, "the client's address is in a region's sources")            \
  X(fallback, "no region matched: this cluster's own relay.vips")
enum class IngressChoice : uint8_t { RTCE_INGRESS_CHOICES(RTCE_VOCAB_MESSAGE_ENUMERATOR) count };
inline constexpr const char* kIngressChoiceNames[] = {RTCE_INGRESS_CHOICES(RTCE_VOCAB_MESSAGE_LABEL)};
#define RTCE_INGRESS_CHOICE_VALUE_(name, doc) IngressChoice::name,
inline constexpr IngressChoice kIngressChoices[] = {RTCE_INGRESS_CHOICES(RTCE_INGRESS_CHOICE_VALUE_)};
#undef RTCE_INGRESS_CHOICE_VALUE_
inline const char* ingress_choice_name(IngressChoice c) { return vocab_name(kIngressChoiceNames, c); }

// relay.ingress_regions: "eu=203.0.113.10:3478" (flags/env) or a YAML map
// {region: eu, vips: "203.0.113.10:3478 [2001:db8::10]:3478", sources: "198.51.100.0/24"}.
struct IngressRegion {
  std::string name;
  std::vector<SocketAddress> vips;  // that region's ingress relay VIPs, in preference order
  std::vector<IpPrefix> sources;    // client addresses served from there (optional)
};
// Throws ConfigError naming `where` and the item.
std::vector<IngressRegion> parse_ingress_regions(const std::vector<std::string>& items,
                                                 const std::string& where);

class IngressSelector {
 public:
  IngressSelector() = default;
  IngressSelector(std::vector<SocketAddress> own_vips, std::vector<IngressRegion> regions);

  struct Choice {
    IngressChoice how = IngressChoice::fallback;
    const IngressRegion* region = nullptr;  // null for the fallback
    // The candidates in priority order: the region's VIPs, then this cluster's own (so a
    // client whose ingress fails can still reach the owning cluster directly).
    std::vector<SocketAddress> vips;
  };
  // `region_header`: the front door's header value ("" when absent); matched exactly,
  // case-insensitively, against region names.
  Choice choose(std::string_view region_header, const SocketAddress& client) const;

  const std::vector<IngressRegion>& regions() const { return regions_; }

 private:
  std::vector<SocketAddress> own_vips_;
  std::vector<IngressRegion> regions_;
};

}  // namespace rtce
