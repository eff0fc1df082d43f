// peer_test.cpp — the Peer with a manual clock and fake I/O: an in-memory client built from
// the transceiver's own client-side parts (IceClientChecker, a DTLS server, SRTP, a data
// channel endpoint) talks to it through a recording DatagramSender and a PathRouter table.
// Covers connect, DTLS early flight, path change (nomination and media), ICE restart,
// consent expiry, channel open and messages, and the end reasons.
#include "peer/peer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include "datachannel/data_channel_endpoint.h"
#include "fake_wall_clock.h"
#include "ice/ice_client.h"
#include "rtce_stun.h"
#include "rtp/rtp.h"

namespace rtce {
namespace {

using testing::set_fake_now;

struct Sent {
  MediaPath path;
  std::vector<uint8_t> bytes;
};

class RecordingSender : public DatagramSender {
 public:
  void send(const MediaPath& path, std::span<const uint8_t> payload) override {
    outbox.push_back({path, {payload.begin(), payload.end()}});
  }
  std::deque<Sent> outbox;
};

class TableRouter : public PathRouter {
 public:
  void route(const PathKey& key, Peer& peer) override { paths[flow_client(key).to_string()] = &peer; }
  void unroute(const PathKey& key, const Peer& peer) override {
    auto it = paths.find(flow_client(key).to_string());
    if (it != paths.end() && it->second == &peer) paths.erase(it);
  }
  void route_ufrag(const std::string& ufrag, Peer&) override { ufrags.insert(ufrag); }
  void unroute_ufrag(const std::string& ufrag, const Peer&) override { ufrags.erase(ufrag); }
  std::map<std::string, Peer*> paths;
  std::set<std::string> ufrags;
};

struct RecordingObserver : PeerObserver {
  void on_peer_connected(Nanos) override { ++connected; }
  void on_peer_audio(const RtpView& rtp, Nanos) override {
    audio.emplace_back(rtp.payload.begin(), rtp.payload.end());
  }
  void on_peer_report(const nlohmann::json& event, Nanos) override { reports.push_back(event); }
  void on_channel_open(uint16_t stream, std::string_view label, std::string_view, Nanos) override {
    opened.emplace_back(stream, std::string(label));
  }
  void on_channel_message(uint16_t, std::span<const uint8_t> message, bool, Nanos) override {
    messages.emplace_back(message.begin(), message.end());
  }
  void on_channel_closed(uint16_t stream, Nanos) override { closed_channels.push_back(stream); }
  void on_channels_failed(std::string_view reason, Nanos) override { channel_failures.emplace_back(reason); }
  void on_peer_closed(SessionEnd reason, Nanos) override { ends.push_back(reason); }

  int connected = 0;
  std::vector<std::vector<uint8_t>> audio;
  std::vector<nlohmann::json> reports;
  std::vector<std::pair<uint16_t, std::string>> opened;
  std::vector<std::string> messages;
  std::vector<uint16_t> closed_channels;
  std::vector<std::string> channel_failures;
  std::vector<SessionEnd> ends;
};

MediaPath direct_path(const char* client) {
  MediaPath p;
  p.client = *SocketAddress::parse(client);
  p.send_to = p.client;
  set_flow_client(p.key, p.client.sa());
  return p;
}

std::shared_ptr<DtlsContext> server_context() {
  static auto ctx = DtlsContext::generate();
  return ctx;
}
std::shared_ptr<DtlsContext> client_context() {
  static auto ctx = DtlsContext::generate();
  return ctx;
}

// The browser side: ICE checks, DTLS (the server when the Peer answers setup:active, the
// default; the client when the offer said setup:active), SRTP and, when asked, a data channel
// endpoint over the DTLS application data.
class FakeClient {
 public:
  FakeClient(std::string server_ufrag, std::string server_pwd, std::string client_ufrag, bool with_channel,
             DtlsTransport::Role role = DtlsTransport::Role::server)
      : checker_(std::move(server_ufrag), std::move(server_pwd), std::move(client_ufrag)) {
    DtlsTransport::Callbacks callbacks;
    callbacks.send = [this](std::span<const uint8_t> d) { to_peer.emplace_back(d.begin(), d.end()); };
    callbacks.on_connected = [this](const SrtpKeys& keys) {
      srtp_out.emplace(keys.profile, SrtpSession::Direction::outbound, keys.local_key_salt);
      srtp_in.emplace(keys.profile, SrtpSession::Direction::inbound, keys.remote_key_salt);
      if (channel) channel->start(now);
    };
    callbacks.on_failed = [this](std::string_view reason) { dtls_failure = reason; };
    callbacks.on_closed = [this] { ++dtls_closed; };
    callbacks.on_application_data = [this](std::span<const uint8_t> data) {
      if (channel) channel->handle_packet(data, now);
    };
    dtls =
        std::make_unique<DtlsTransport>(client_context(), role, server_context()->fingerprint_sha256_bytes(),
                                        std::move(callbacks), DtlsTransport::Config{});
    dtls->start(now);
    if (with_channel) {
      DataChannelEndpoint::Config config;
      config.dtls_client = role == DtlsTransport::Role::client;
      DataChannelEndpoint::Callbacks cb;
      cb.send = [this](std::span<const uint8_t> packet) { dtls->send_application_data(packet); };
      cb.on_open = [this](uint16_t stream, std::string_view, std::string_view) {
        open_streams.push_back(stream);
      };
      cb.on_message = [this](uint16_t, std::span<const uint8_t> m, bool) {
        received_text.emplace_back(m.begin(), m.end());
      };
      cb.on_closed = [](uint16_t) {};
      cb.on_failed = [](std::string_view) {};
      channel = std::make_unique<DataChannelEndpoint>(config, std::move(cb));
    }
  }

  std::vector<uint8_t> check(bool nominate = true) {
    std::vector<uint8_t> out(512);
    IceClientChecker::RequestOptions options;
    options.use_candidate = nominate;
    out.resize(checker_.build_request(out, options));
    return out;
  }

  // One datagram from the Peer: STUN responses are checked, the Peer's own checks ignored
  // (a lite server's triggered checks need no answer here), DTLS and SRTP handled.
  void receive(std::vector<uint8_t> bytes) {
    switch (rtce_classify_first_byte(bytes[0])) {
      case RTCE_FIRST_BYTE_STUN:
        if (!stun_request_server_ufrag(bytes)) last_verdict = checker_.process_response(bytes).verdict;
        break;
      case RTCE_FIRST_BYTE_DTLS:
        ++dtls_received;
        dtls_datagrams.push_back(bytes);
        if (drop_dtls && drop_dtls()) {
          ++dtls_dropped;
          break;
        }
        if (deliver_dtls) dtls->handle_datagram(bytes, now);
        break;
      case RTCE_FIRST_BYTE_RTP: {
        size_t len = bytes.size();
        if (srtp_in && !is_rtcp(bytes) && srtp_in->unprotect_rtp(bytes.data(), len) == SrtpError::ok) {
          if (auto rtp = parse_rtp({bytes.data(), len}, std::nullopt))
            audio.emplace_back(rtp->payload.begin(), rtp->payload.end());
        }
        break;
      }
      default: break;
    }
  }

  std::vector<uint8_t> rtp(std::span<const uint8_t> payload) {
    std::vector<uint8_t> buf(1500);
    size_t len = write_rtp_header(buf, 111, false, seq_++, timestamp_, 0x1234);
    timestamp_ += 960;
    std::copy(payload.begin(), payload.end(), buf.begin() + static_cast<ptrdiff_t>(len));
    len += payload.size();
    EXPECT_EQ(srtp_out->protect_rtp(buf.data(), len, buf.size()), SrtpError::ok);
    buf.resize(len);
    return buf;
  }

  bool dtls_connected() const { return dtls->state() == DtlsTransport::State::connected; }

  Nanos now = 1'000'000'000;
  std::unique_ptr<DtlsTransport> dtls;
  std::unique_ptr<DataChannelEndpoint> channel;
  std::optional<SrtpSession> srtp_out, srtp_in;
  std::deque<std::vector<uint8_t>> to_peer;  // DTLS the client sent, not yet delivered
  std::optional<IceClientChecker::Verdict> last_verdict;
  std::string dtls_failure;
  bool deliver_dtls = true;
  std::function<bool()> drop_dtls;  // consulted per DTLS datagram from the Peer: true loses it
  size_t dtls_received = 0, dtls_dropped = 0;
  int dtls_closed = 0;  // close_notify from the Peer
  std::vector<std::vector<uint8_t>> dtls_datagrams;
  std::vector<std::vector<uint8_t>> audio;
  std::vector<uint16_t> open_streams;
  std::vector<std::string> received_text;

 private:
  IceClientChecker checker_;
  uint16_t seq_ = 100;
  uint32_t timestamp_ = 5000;
};

class PeerTest : public ::testing::Test {
 protected:
  void make_peer(bool with_channel = false, bool has_audio = true,
                 DtlsTransport::Role peer_role = DtlsTransport::Role::client) {
    PeerPlan plan;
    plan.id = "test";
    plan.local_ufrag = "srv1";
    plan.local_pwd = "serverpasswordserverpass";
    plan.remote_ufrag = "cli1";
    plan.remote_pwd = "clientpasswordclientpass";
    plan.remote_fingerprint = client_context()->fingerprint_sha256_bytes();
    plan.dtls_role = peer_role;
    plan.ssrc = 0xabcdef;
    plan.cname = "peer-test";
    plan.offer_received_at = now;
    plan.has_audio = has_audio;
    if (with_channel) plan.data_channel = DataChannelPlan{5000, 5000, 65536, 65536};
    set_fake_now(now);
    peer = std::make_unique<Peer>(
        plan, PeerEnvironment{sender, router, observer, metrics, log, server_context(), settings}, now);
    router.route_ufrag(plan.local_ufrag, *peer);
    client = std::make_unique<FakeClient>(
        plan.local_ufrag, plan.local_pwd, plan.remote_ufrag, with_channel,
        peer_role == DtlsTransport::Role::client ? DtlsTransport::Role::server : DtlsTransport::Role::client);
  }

  void advance(Nanos by) {
    now += by;
    client->now = now;
    set_fake_now(now);
  }

  // A STUN check from `from`; returns the verdict of the Peer's answer.
  std::optional<IceClientChecker::Verdict> check_from(const MediaPath& from, bool nominate = true) {
    auto request = client->check(nominate);
    client->last_verdict.reset();
    peer->handle(request, from, now);
    pump(from);
    return client->last_verdict;
  }

  // Moves datagrams both ways until both sides are quiet; the client sends from `from`.
  void pump(const MediaPath& from) {
    for (int round = 0; round < 100 && (!sender.outbox.empty() || !client->to_peer.empty()); ++round) {
      while (!sender.outbox.empty()) {
        Sent s = std::move(sender.outbox.front());
        sender.outbox.pop_front();
        sent_to.push_back(s.path.client.to_string());
        client->receive(std::move(s.bytes));
      }
      if (client->channel) client->channel->pump(now);
      while (!client->to_peer.empty()) {
        auto d = std::move(client->to_peer.front());
        client->to_peer.pop_front();
        peer->handle(d, from, now);
      }
      peer->tick(now);
    }
  }

  // Ticks both sides every 10 ms (the client's DTLS and SCTP timers included) until done.
  bool run_until(const std::function<bool()>& done, const MediaPath& from, Nanos limit = 5'000'000'000) {
    const Nanos until = now + limit;
    while (now < until) {
      pump(from);
      if (done()) return true;
      advance(10'000'000);
      if (auto t = client->dtls->next_timeout(now); t && *t <= now) client->dtls->on_timer(now);
      if (client->channel) client->channel->pump(now);
      peer->tick(now);
    }
    return done();
  }

  void connect(const MediaPath& from) {
    ASSERT_EQ(check_from(from), IceClientChecker::Verdict::success);
    ASSERT_TRUE(run_until([&] { return observer.connected == 1 && client->dtls_connected(); }, from));
  }

  Nanos now = 1'000'000'000;
  PeerSettings settings;
  RecordingSender sender;
  TableRouter router;
  RecordingObserver observer;
  WorkerMetrics metrics;
  EventLog log{now};
  std::unique_ptr<Peer> peer;
  std::unique_ptr<FakeClient> client;
  std::vector<std::string> sent_to;
  const MediaPath path_a = direct_path("198.18.0.10:50000");
  const MediaPath path_b = direct_path("198.18.0.11:50001");
};

uint64_t drops(const WorkerMetrics& m, DatagramDrop d) { return m.drops[static_cast<size_t>(d)].get(); }

TEST_F(PeerTest, ConnectsAndCarriesAudioBothWays) {
  make_peer();
  connect(path_a);
  EXPECT_TRUE(peer->connected());
  EXPECT_EQ(router.paths.count(path_a.client.to_string()), 1u);
  const std::vector<uint8_t> frame = {0xf8, 0xff, 0xfe};
  auto packet = client->rtp(frame);
  peer->handle(packet, path_a, now);
  ASSERT_EQ(observer.audio.size(), 1u);
  EXPECT_EQ(observer.audio[0], frame);
  peer->send_audio(frame, now);
  pump(path_a);
  ASSERT_EQ(client->audio.size(), 1u);
  EXPECT_EQ(client->audio[0], frame);
  EXPECT_TRUE(observer.ends.empty());
}

TEST_F(PeerTest, RtpBeforeDtlsIsCountedNotReady) {
  make_peer();
  client->deliver_dtls = false;
  ASSERT_EQ(check_from(path_a), IceClientChecker::Verdict::success);
  std::vector<uint8_t> fake_rtp(40, 0);
  fake_rtp[0] = 0x80;
  fake_rtp[1] = 111;
  peer->handle(fake_rtp, path_a, now);
  EXPECT_EQ(drops(metrics, DatagramDrop::not_ready), 1u);
  EXPECT_TRUE(observer.audio.empty());
}

TEST_F(PeerTest, EarlyDtlsFlightIsResentTheMomentIceConnects) {
  make_peer();
  client->deliver_dtls = false;  // a full-ICE client (Pion) drops DTLS before its ICE connects
  ASSERT_EQ(check_from(path_a, /*nominate=*/false), IceClientChecker::Verdict::success);
  ASSERT_EQ(client->dtls_received, 1u) << "the ClientHello goes out on the first valid check";
  // Nomination connects ICE: the same first flight again at once, not after the DTLS timer.
  ASSERT_EQ(check_from(path_a, /*nominate=*/true), IceClientChecker::Verdict::success);
  ASSERT_EQ(client->dtls_received, 2u);
  EXPECT_EQ(client->dtls_datagrams[0], client->dtls_datagrams[1]);
  client->deliver_dtls = true;
  EXPECT_TRUE(run_until([&] { return observer.connected == 1; }, path_a));
}

TEST_F(PeerTest, NominationFromAnotherAddressMovesTheMediaPath) {
  make_peer();
  connect(path_a);
  ASSERT_EQ(check_from(path_b, /*nominate=*/true), IceClientChecker::Verdict::success);
  EXPECT_EQ(peer->path().client, path_b.client);
  EXPECT_EQ(router.paths.count(path_a.client.to_string()), 0u);
  EXPECT_EQ(router.paths.count(path_b.client.to_string()), 1u);
  EXPECT_EQ(metrics.path_switches.get(), 1u);
  sent_to.clear();
  peer->send_audio(std::vector<uint8_t>{1, 2, 3}, now);
  pump(path_b);
  ASSERT_FALSE(sent_to.empty());
  EXPECT_EQ(sent_to.back(), path_b.client.to_string());
}

TEST_F(PeerTest, CandidatePathBecomesTheMediaPathOnAuthenticatedMedia) {
  make_peer();
  connect(path_a);
  // A check without nomination from a new address: a candidate, routed, not the media path.
  ASSERT_EQ(check_from(path_b, /*nominate=*/false), IceClientChecker::Verdict::success);
  EXPECT_EQ(peer->path().client, path_a.client);
  EXPECT_EQ(router.paths.count(path_b.client.to_string()), 1u);
  // Authenticated SRTP from it: the client is there now.
  auto media = client->rtp(std::vector<uint8_t>{9});
  peer->handle(media, path_b, now);
  EXPECT_EQ(peer->path().client, path_b.client);
  EXPECT_EQ(router.paths.count(path_a.client.to_string()), 0u);
  // Unauthenticated bytes from a third address move nothing.
  const MediaPath path_c = direct_path("198.18.0.12:50002");
  std::vector<uint8_t> forged = client->rtp(std::vector<uint8_t>{9});
  forged.back() ^= 0xff;
  peer->handle(forged, path_c, now);
  EXPECT_EQ(peer->path().client, path_b.client);
  EXPECT_EQ(drops(metrics, DatagramDrop::srtp_failed), 1u);
}

TEST_F(PeerTest, IceRestartSwapsCredentialsAndReportsToTheApplication) {
  make_peer();
  connect(path_a);
  EXPECT_EQ(peer->etag(), "\"1\"");
  Peer::IceRestartRequest wrong{"srv2", "serverpasswordserverpas2", "cli2", "clientpasswordclientpas2",
                                "\"7\""};
  EXPECT_EQ(peer->begin_ice_restart(wrong, now), Peer::IceRestartVerdict::precondition_failed);
  Peer::IceRestartRequest missing = wrong;
  missing.if_match = "";
  EXPECT_EQ(peer->begin_ice_restart(missing, now), Peer::IceRestartVerdict::precondition_required);
  Peer::IceRestartRequest request = wrong;
  request.if_match = peer->etag();
  ASSERT_EQ(peer->begin_ice_restart(request, now), Peer::IceRestartVerdict::started);
  EXPECT_EQ(router.ufrags.count("srv2"), 1u);
  EXPECT_EQ(router.ufrags.count("srv1"), 1u) << "the old ufrag works until the new one nominates";
  // The client checks with the new credentials from a new address and nominates.
  IceClientChecker restarted("srv2", "serverpasswordserverpas2", "cli2");
  std::vector<uint8_t> check(512);
  check.resize(restarted.build_request(check));
  peer->handle(check, path_b, now);
  ASSERT_FALSE(sender.outbox.empty());
  EXPECT_EQ(restarted.process_response(sender.outbox.front().bytes).verdict,
            IceClientChecker::Verdict::success);
  sender.outbox.clear();
  EXPECT_EQ(router.ufrags.count("srv1"), 0u);
  EXPECT_EQ(peer->local_ufrag(), "srv2");
  EXPECT_EQ(peer->etag(), "\"2\"");
  EXPECT_EQ(peer->path().client, path_b.client);
  ASSERT_EQ(observer.reports.size(), 1u);
  EXPECT_EQ(observer.reports[0]["type"], "session.ice_restarted");
  EXPECT_EQ(observer.reports[0]["client_address"], path_b.client.to_string());
  EXPECT_EQ(metrics.ice_restarts[static_cast<size_t>(IceRestartResult::completed)].get(), 1u);
  // A check with the old credentials is refused now.
  EXPECT_NE(check_from(path_a), IceClientChecker::Verdict::success);
}

TEST_F(PeerTest, IceRestartsAreRateLimited) {
  make_peer();
  connect(path_a);
  int started = 0;
  for (int i = 0; i < 5; ++i) {
    Peer::IceRestartRequest r{"srvR" + std::to_string(i), "serverpasswordserverpass",
                              "cliR" + std::to_string(i), "clientpasswordclientpass", "*"};
    if (peer->begin_ice_restart(r, now) == Peer::IceRestartVerdict::started) ++started;
  }
  EXPECT_EQ(started, 3);
  EXPECT_EQ(metrics.ice_restarts[static_cast<size_t>(IceRestartResult::rate_limited)].get(), 2u);
  advance(10'000'000'000);
  Peer::IceRestartRequest later{"srvL", "serverpasswordserverpass", "cliL", "clientpasswordclientpass", "*"};
  EXPECT_EQ(peer->begin_ice_restart(later, now), Peer::IceRestartVerdict::started);
}

TEST_F(PeerTest, ConsentExpiresWhenChecksStop) {
  settings.consent_timeout = 3'000'000'000;
  make_peer();
  connect(path_a);
  // Checks keep consent alive...
  for (int i = 0; i < 4; ++i) {
    advance(1'000'000'000);
    peer->tick(now);
    ASSERT_EQ(check_from(path_a), IceClientChecker::Verdict::success);
  }
  EXPECT_TRUE(observer.ends.empty());
  // ...and their absence ends the session, on the Peer's own deadline.
  const Nanos started = now;
  while (observer.ends.empty() && now - started < 10'000'000'000) {
    now = std::max(now + 1, peer->next_deadline(now));
    set_fake_now(now);
    peer->tick(now);
  }
  ASSERT_EQ(observer.ends.size(), 1u);
  EXPECT_EQ(observer.ends[0], SessionEnd::consent_expired);
  EXPECT_GE(now - started, settings.consent_timeout - 1'000'000'000);
  EXPECT_TRUE(peer->ended());
}

TEST_F(PeerTest, NoChecksEndsWithConnectTimeout) {
  settings.connect_timeout = 2'000'000'000;
  make_peer();
  advance(1'000'000'000);
  peer->tick(now);
  EXPECT_TRUE(observer.ends.empty());
  advance(peer->next_deadline(now) - now);
  peer->tick(now);
  ASSERT_EQ(observer.ends.size(), 1u);
  EXPECT_EQ(observer.ends[0], SessionEnd::connect_timeout);
}

TEST_F(PeerTest, ClientCloseNotifyEndsAsPeerClosed) {
  make_peer();
  connect(path_a);
  client->dtls->close();
  pump(path_a);
  ASSERT_EQ(observer.ends.size(), 1u);
  EXPECT_EQ(observer.ends[0], SessionEnd::peer_closed);
}

TEST_F(PeerTest, WrongFingerprintEndsAsDtlsFailed) {
  make_peer();
  // The client presents a certificate the offer did not announce.
  PeerPlan plan = peer->plan();
  plan.remote_fingerprint.assign(32, 0xaa);
  router.ufrags.clear();
  peer = std::make_unique<Peer>(
      plan, PeerEnvironment{sender, router, observer, metrics, log, server_context(), settings}, now);
  ASSERT_EQ(check_from(path_a), IceClientChecker::Verdict::success);
  ASSERT_TRUE(run_until([&] { return !observer.ends.empty(); }, path_a));
  EXPECT_EQ(observer.ends[0], SessionEnd::dtls_failed);
  EXPECT_FALSE(peer->dtls_failure().empty());
}

TEST_F(PeerTest, EndCallsNoObserverAndReleasesEveryRoute) {
  make_peer();
  connect(path_a);
  ASSERT_EQ(check_from(path_b, /*nominate=*/false), IceClientChecker::Verdict::success);
  peer->end(now);
  EXPECT_TRUE(observer.ends.empty());
  peer->release_paths();
  EXPECT_TRUE(router.paths.empty());
  EXPECT_TRUE(router.ufrags.empty());
  // Datagrams after the end are not delivered anywhere.
  auto late = client->rtp(std::vector<uint8_t>{1});
  peer->handle(late, path_a, now);
  EXPECT_TRUE(observer.audio.empty());
}

TEST_F(PeerTest, DataChannelOpensAndCarriesTextBothWays) {
  make_peer(/*with_channel=*/true);
  connect(path_a);
  std::optional<uint16_t> stream;
  ASSERT_TRUE(run_until(
      [&] {
        if (!stream && client->channel->state() == DataChannelEndpoint::State::open)
          stream = client->channel->open_channel("oai-events", "");
        return !observer.opened.empty();
      },
      path_a));
  ASSERT_TRUE(stream);
  EXPECT_EQ(observer.opened[0].first, *stream);
  EXPECT_EQ(observer.opened[0].second, "oai-events");
  ASSERT_TRUE(client->channel->send_text(*stream, R"({"type":"ping"})"));
  ASSERT_TRUE(run_until([&] { return !observer.messages.empty(); }, path_a));
  EXPECT_EQ(observer.messages[0], R"({"type":"ping"})");
  ASSERT_TRUE(peer->send_channel_text(*stream, R"({"type":"pong"})"));
  ASSERT_TRUE(run_until([&] { return !client->received_text.empty(); }, path_a));
  EXPECT_EQ(client->received_text[0], R"({"type":"pong"})");
  EXPECT_EQ(metrics.data_channels_opened.get(), 1u);
}

TEST_F(PeerTest, AudioOnlySessionReleasesItsSslAndStillSendsCloseNotifyAtTheEnd) {
  make_peer();
  connect(path_a);
  EXPECT_TRUE(peer->dtls_released());
  auto packet = client->rtp(std::vector<uint8_t>{1, 2, 3});
  peer->handle(packet, path_a, now);
  ASSERT_EQ(observer.audio.size(), 1u);
  peer->end(now);
  pump(path_a);
  EXPECT_EQ(client->dtls_closed, 1);
  EXPECT_EQ(client->dtls->state(), DtlsTransport::State::closed);
  EXPECT_TRUE(observer.ends.empty());  // end() calls no observer
}

TEST_F(PeerTest, SessionWithADataChannelKeepsItsSsl) {
  make_peer(/*with_channel=*/true);
  connect(path_a);
  EXPECT_FALSE(peer->dtls_released());
}

// The offer said setup:active, so the Peer is the DTLS server. Its final flight (CCS,
// Finished) is lost after it released the SSL; the client retransmits its own final flight and
// gets the Peer's again, media flows, and the end still sends close_notify.
TEST_F(PeerTest, ReleasedServerAnswersARetransmittedClientFinalFlight) {
  make_peer(/*with_channel=*/false, /*has_audio=*/true, DtlsTransport::Role::server);
  // Lose what the Peer sends once it is connected, until the client has retransmitted.
  client->drop_dtls = [&] {
    return observer.connected == 1 && !client->dtls_connected() &&
           client->dtls->stats().retransmit_timeouts == 0;
  };
  connect(path_a);
  EXPECT_GE(client->dtls_dropped, 1u);
  EXPECT_TRUE(peer->dtls_released());
  EXPECT_EQ(client->dtls->stats().retransmit_timeouts, 1u);
  EXPECT_TRUE(client->dtls_failure.empty()) << client->dtls_failure;
  auto packet = client->rtp(std::vector<uint8_t>{7, 7});
  peer->handle(packet, path_a, now);
  ASSERT_EQ(observer.audio.size(), 1u);
  peer->send_audio(std::vector<uint8_t>{9, 9, 9}, now);
  pump(path_a);
  ASSERT_EQ(client->audio.size(), 1u);
  EXPECT_EQ(client->audio[0], (std::vector<uint8_t>{9, 9, 9}));
  peer->end(now);
  pump(path_a);
  EXPECT_EQ(client->dtls_closed, 1);
}

TEST_F(PeerTest, SctpWithoutNegotiatedChannelIsCounted) {
  make_peer(/*with_channel=*/false);
  connect(path_a);
  const uint8_t sctp[] = {0x13, 0x88, 0x13, 0x88, 0, 0, 0, 0, 0, 0, 0, 0};
  ASSERT_TRUE(client->dtls->send_application_data(sctp));
  pump(path_a);
  EXPECT_EQ(drops(metrics, DatagramDrop::no_data_channel), 1u);
}

// RFC 9110 section 13.1.1: If-Match is "*" or a list of strong entity tags.
TEST(IfMatch, AListNamingTheCurrentTagMatches) {
  EXPECT_TRUE(if_match_names("\"1\"", "\"1\""));
  EXPECT_TRUE(if_match_names("*", "\"1\""));
  EXPECT_TRUE(if_match_names("\"7\", \"1\"", "\"1\""));
  EXPECT_TRUE(if_match_names("\"7\",\"1\"", "\"1\""));
  EXPECT_TRUE(if_match_names(" \"1\" ,\t\"9\"", "\"1\""));
  EXPECT_FALSE(if_match_names("\"7\", \"8\"", "\"1\""));
  EXPECT_FALSE(if_match_names("W/\"1\"", "\"1\"")) << "weak tags never match strongly";
  EXPECT_FALSE(if_match_names("1", "\"1\"")) << "an unquoted tag is not the tag";
  EXPECT_FALSE(if_match_names(",", "\"1\""));
}

}  // namespace
}  // namespace rtce
