// srtp_session_test.cpp — SrtpSession round trips for every profile, tampering, wrong keys,
// replay, buffer limits, and known-answer packets computed outside libsrtp (tools/srtp_kat.py).
// Built against both backends.
#include "transceiver/srtp/srtp_session.h"

#include <gtest/gtest.h>

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

namespace rtce {
namespace {

using Direction = SrtpSession::Direction;

std::vector<uint8_t> from_hex(std::string_view hex) {
  std::vector<uint8_t> out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    out.push_back(static_cast<uint8_t>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  return out;
}

std::vector<uint8_t> key_salt_for(SrtpProfile profile) {
  // Same fixed inputs as tools/srtp_kat.py.
  std::vector<uint8_t> key;
  for (size_t i = 1; i <= srtp_master_key_length(profile); ++i) key.push_back(static_cast<uint8_t>(i));
  uint8_t salt_start = profile == SrtpProfile::aes128_cm_sha1_80 ? 0xA0 : 0xB0;
  for (size_t i = 0; i < srtp_master_salt_length(profile); ++i)
    key.push_back(static_cast<uint8_t>(salt_start + i));
  return key;
}

std::vector<uint8_t> kat_rtp() {
  std::vector<uint8_t> p = from_hex("806f1234000003e8deadbeef");
  std::string payload = "rtcedge opus payload!";
  p.insert(p.end(), payload.begin(), payload.end());
  return p;
}

std::vector<uint8_t> kat_rtcp() {
  std::vector<uint8_t> p = from_hex("81c90007deadbeef");
  for (int i = 0x10; i < 0x28; ++i) p.push_back(static_cast<uint8_t>(i));
  return p;
}

std::vector<uint8_t> rtp_packet(uint16_t seq, uint32_t ssrc = 0x11223344, size_t payload = 160) {
  std::vector<uint8_t> p = {0x80,
                            111,
                            static_cast<uint8_t>(seq >> 8),
                            static_cast<uint8_t>(seq),
                            0,
                            0,
                            0x10,
                            0,
                            static_cast<uint8_t>(ssrc >> 24),
                            static_cast<uint8_t>(ssrc >> 16),
                            static_cast<uint8_t>(ssrc >> 8),
                            static_cast<uint8_t>(ssrc)};
  for (size_t i = 0; i < payload; ++i) p.push_back(static_cast<uint8_t>(i * 7 + seq));
  return p;
}

// A buffer with exactly the trailer's room after the packet, so overruns would show in ASan.
struct Packet {
  std::vector<uint8_t> buffer;
  size_t len;
  explicit Packet(const std::vector<uint8_t>& bytes, size_t room) : buffer(bytes), len(bytes.size()) {
    buffer.resize(bytes.size() + room);
  }
  std::vector<uint8_t> bytes() const { return {buffer.begin(), buffer.begin() + static_cast<long>(len)}; }
};

class SrtpEveryProfile : public ::testing::TestWithParam<SrtpProfile> {
 protected:
  SrtpProfile profile() const { return GetParam(); }
  SrtpSession sender{GetParam(), Direction::outbound, key_salt_for(GetParam())};
  SrtpSession receiver{GetParam(), Direction::inbound, key_salt_for(GetParam())};
};

TEST_P(SrtpEveryProfile, RtpRoundTripRestoresTheBytes) {
  for (uint16_t seq = 65530; seq != 10; ++seq) {  // crosses the sequence-number wrap (ROC 1)
    std::vector<uint8_t> plain = rtp_packet(seq);
    Packet p(plain, srtp_rtp_trailer_length(profile()));
    ASSERT_EQ(sender.protect_rtp(p.buffer.data(), p.len, p.buffer.size()), SrtpError::ok);
    EXPECT_EQ(p.len, plain.size() + srtp_rtp_trailer_length(profile()));
    EXPECT_NE(p.bytes(), plain);
    ASSERT_EQ(receiver.unprotect_rtp(p.buffer.data(), p.len), SrtpError::ok) << seq;
    EXPECT_EQ(p.bytes(), plain);
  }
}

TEST_P(SrtpEveryProfile, RtcpRoundTripRestoresTheBytes) {
  for (int i = 0; i < 5; ++i) {
    std::vector<uint8_t> plain = kat_rtcp();
    plain[20] = static_cast<uint8_t>(i);
    Packet p(plain, srtp_rtcp_trailer_length(profile()));
    ASSERT_EQ(sender.protect_rtcp(p.buffer.data(), p.len, p.buffer.size()), SrtpError::ok);
    EXPECT_EQ(p.len, plain.size() + srtp_rtcp_trailer_length(profile()));
    ASSERT_EQ(receiver.unprotect_rtcp(p.buffer.data(), p.len), SrtpError::ok);
    EXPECT_EQ(p.bytes(), plain);
  }
}

TEST_P(SrtpEveryProfile, TamperedBytesFailAuthentication) {
  std::vector<uint8_t> plain = rtp_packet(1);
  Packet protected_packet(plain, SrtpSession::max_trailer);
  ASSERT_EQ(sender.protect_rtp(protected_packet.buffer.data(), protected_packet.len,
                               protected_packet.buffer.size()),
            SrtpError::ok);
  for (size_t position : {size_t{1}, size_t{12}, protected_packet.len - 1}) {
    Packet p = protected_packet;
    p.buffer[position] ^= 0x01;
    EXPECT_EQ(receiver.unprotect_rtp(p.buffer.data(), p.len), SrtpError::auth_failed) << position;
  }
  // The untouched packet is still accepted: failures did not advance the replay window.
  EXPECT_EQ(receiver.unprotect_rtp(protected_packet.buffer.data(), protected_packet.len), SrtpError::ok);

  std::vector<uint8_t> rtcp = kat_rtcp();
  Packet r(rtcp, SrtpSession::max_trailer);
  ASSERT_EQ(sender.protect_rtcp(r.buffer.data(), r.len, r.buffer.size()), SrtpError::ok);
  r.buffer[10] ^= 0x80;
  EXPECT_EQ(receiver.unprotect_rtcp(r.buffer.data(), r.len), SrtpError::auth_failed);
}

TEST_P(SrtpEveryProfile, ReplayedPacketsAreRejected) {
  Packet first(rtp_packet(100), SrtpSession::max_trailer);
  ASSERT_EQ(sender.protect_rtp(first.buffer.data(), first.len, first.buffer.size()), SrtpError::ok);
  Packet copy = first;
  ASSERT_EQ(receiver.unprotect_rtp(first.buffer.data(), first.len), SrtpError::ok);
  EXPECT_EQ(receiver.unprotect_rtp(copy.buffer.data(), copy.len), SrtpError::replay);

  // Out of order within the window is fine; far behind the window is a replay.
  std::vector<Packet> later;
  for (uint16_t seq = 101; seq < 400; ++seq) {
    later.emplace_back(rtp_packet(seq), SrtpSession::max_trailer);
    ASSERT_EQ(sender.protect_rtp(later.back().buffer.data(), later.back().len, later.back().buffer.size()),
              SrtpError::ok);
  }
  EXPECT_EQ(receiver.unprotect_rtp(later[10].buffer.data(), later[10].len), SrtpError::ok);
  EXPECT_EQ(receiver.unprotect_rtp(later[5].buffer.data(), later[5].len), SrtpError::ok);
  EXPECT_EQ(receiver.unprotect_rtp(later.back().buffer.data(), later.back().len), SrtpError::ok);
  EXPECT_EQ(receiver.unprotect_rtp(later[20].buffer.data(), later[20].len), SrtpError::replay);  // 279 behind

  Packet rtcp(kat_rtcp(), SrtpSession::max_trailer);
  ASSERT_EQ(sender.protect_rtcp(rtcp.buffer.data(), rtcp.len, rtcp.buffer.size()), SrtpError::ok);
  Packet rtcp_copy = rtcp;
  ASSERT_EQ(receiver.unprotect_rtcp(rtcp.buffer.data(), rtcp.len), SrtpError::ok);
  EXPECT_EQ(receiver.unprotect_rtcp(rtcp_copy.buffer.data(), rtcp_copy.len), SrtpError::replay);
}

TEST_P(SrtpEveryProfile, ProtectingTheSameSequenceTwiceIsRefused) {
  Packet a(rtp_packet(7), SrtpSession::max_trailer);
  Packet b(rtp_packet(7), SrtpSession::max_trailer);
  ASSERT_EQ(sender.protect_rtp(a.buffer.data(), a.len, a.buffer.size()), SrtpError::ok);
  EXPECT_EQ(sender.protect_rtp(b.buffer.data(), b.len, b.buffer.size()), SrtpError::replay);
}

TEST_P(SrtpEveryProfile, WrongKeyFailsAuthentication) {
  // A different master key (first and last byte: AES-256 keys differ past 16 bytes) or salt.
  const size_t key_length = srtp_master_key_length(profile());
  for (size_t flipped : {size_t{0}, key_length - 1, key_length}) {
    SCOPED_TRACE(flipped);
    std::vector<uint8_t> other = key_salt_for(profile());
    other[flipped] ^= 0xff;
    SrtpSession stranger(profile(), Direction::inbound, other);
    Packet p(rtp_packet(static_cast<uint16_t>(1 + flipped)), SrtpSession::max_trailer);
    ASSERT_EQ(sender.protect_rtp(p.buffer.data(), p.len, p.buffer.size()), SrtpError::ok);
    EXPECT_EQ(stranger.unprotect_rtp(p.buffer.data(), p.len), SrtpError::auth_failed);
    Packet r(kat_rtcp(), SrtpSession::max_trailer);
    ASSERT_EQ(sender.protect_rtcp(r.buffer.data(), r.len, r.buffer.size()), SrtpError::ok);
    EXPECT_EQ(stranger.unprotect_rtcp(r.buffer.data(), r.len), SrtpError::auth_failed);
  }
}

TEST_P(SrtpEveryProfile, TamperedTagOrSrtcpIndexFailsAuthentication) {
  Packet rtp(rtp_packet(3), SrtpSession::max_trailer);
  ASSERT_EQ(sender.protect_rtp(rtp.buffer.data(), rtp.len, rtp.buffer.size()), SrtpError::ok);
  for (size_t back = 1; back <= srtp_rtp_trailer_length(profile()); ++back) {  // every tag byte
    Packet p = rtp;
    p.buffer[p.len - back] ^= 0x40;
    EXPECT_EQ(receiver.unprotect_rtp(p.buffer.data(), p.len), SrtpError::auth_failed) << back;
  }
  Packet rtcp(kat_rtcp(), SrtpSession::max_trailer);
  ASSERT_EQ(sender.protect_rtcp(rtcp.buffer.data(), rtcp.len, rtcp.buffer.size()), SrtpError::ok);
  for (size_t back = 1; back <= srtp_rtcp_trailer_length(profile()); ++back) {  // tag, E flag, index
    Packet p = rtcp;
    p.buffer[p.len - back] ^= back == srtp_rtcp_trailer_length(profile()) ? 0x01 : 0x40;
    EXPECT_NE(receiver.unprotect_rtcp(p.buffer.data(), p.len), SrtpError::ok) << back;
  }
  // Neither the tampered copies nor the failures moved a window.
  EXPECT_EQ(receiver.unprotect_rtp(rtp.buffer.data(), rtp.len), SrtpError::ok);
  EXPECT_EQ(receiver.unprotect_rtcp(rtcp.buffer.data(), rtcp.len), SrtpError::ok);
}

TEST_P(SrtpEveryProfile, SrtcpIndexCountsFromOneWithTheEncryptedFlag) {
  // RFC 3711 §3.4 / RFC 7714 §9: E flag || 31-bit index, after the tag (GCM) or before it (AES-CM).
  for (uint32_t expected = 1; expected <= 3; ++expected) {
    Packet p(kat_rtcp(), SrtpSession::max_trailer);
    ASSERT_EQ(sender.protect_rtcp(p.buffer.data(), p.len, p.buffer.size()), SrtpError::ok);
    const size_t at = profile() == SrtpProfile::aes128_cm_sha1_80 ? p.len - 10 - 4 : p.len - 4;
    const uint32_t e_index = uint32_t{p.buffer[at]} << 24 | uint32_t{p.buffer[at + 1]} << 16 |
                             uint32_t{p.buffer[at + 2]} << 8 | p.buffer[at + 3];
    EXPECT_EQ(e_index, 0x80000000u | expected);
    ASSERT_EQ(receiver.unprotect_rtcp(p.buffer.data(), p.len), SrtpError::ok);
  }
}

TEST_P(SrtpEveryProfile, NoSpaceForTheTrailerLeavesThePacketUntouched) {
  std::vector<uint8_t> plain = rtp_packet(1);
  Packet p(plain, srtp_rtp_trailer_length(profile()) - 1);
  EXPECT_EQ(sender.protect_rtp(p.buffer.data(), p.len, p.buffer.size()), SrtpError::no_space);
  EXPECT_EQ(p.bytes(), plain);
  Packet r(kat_rtcp(), srtp_rtcp_trailer_length(profile()) - 1);
  EXPECT_EQ(sender.protect_rtcp(r.buffer.data(), r.len, r.buffer.size()), SrtpError::no_space);
  EXPECT_LE(srtp_rtp_trailer_length(profile()), SrtpSession::max_trailer);
  EXPECT_LE(srtp_rtcp_trailer_length(profile()), SrtpSession::max_trailer);
}

TEST_P(SrtpEveryProfile, MalformedPacketsAreBadPackets) {
  std::vector<uint8_t> tiny = {0x80, 0, 0};
  size_t len = tiny.size();
  EXPECT_EQ(receiver.unprotect_rtp(tiny.data(), len), SrtpError::bad_packet);
  EXPECT_EQ(receiver.unprotect_rtcp(tiny.data(), len), SrtpError::bad_packet);
  std::vector<uint8_t> version1 = rtp_packet(1);
  version1[0] = 0x40;
  len = version1.size();
  EXPECT_EQ(receiver.unprotect_rtp(version1.data(), len), SrtpError::bad_packet);
  len = 0;
  EXPECT_EQ(receiver.unprotect_rtp(nullptr, len), SrtpError::bad_packet);
  // A header that claims 15 CSRCs and an extension beyond the packet.
  std::vector<uint8_t> lying = rtp_packet(1, 1, 20);
  lying[0] = 0x9f;
  len = lying.size();
  EXPECT_NE(receiver.unprotect_rtp(lying.data(), len), SrtpError::ok);
}

TEST_P(SrtpEveryProfile, DirectionIsEnforced) {
  Packet p(rtp_packet(1), SrtpSession::max_trailer);
  EXPECT_EQ(receiver.protect_rtp(p.buffer.data(), p.len, p.buffer.size()), SrtpError::other);
  EXPECT_EQ(sender.unprotect_rtp(p.buffer.data(), p.len), SrtpError::other);
}

TEST_P(SrtpEveryProfile, MovedSessionKeepsItsState) {
  Packet p(rtp_packet(1), SrtpSession::max_trailer);
  SrtpSession moved = std::move(sender);
  ASSERT_EQ(moved.protect_rtp(p.buffer.data(), p.len, p.buffer.size()), SrtpError::ok);
  SrtpSession target(profile(), Direction::inbound, key_salt_for(profile()));
  target = std::move(receiver);
  EXPECT_EQ(target.unprotect_rtp(p.buffer.data(), p.len), SrtpError::ok);
}

INSTANTIATE_TEST_SUITE_P(Profiles, SrtpEveryProfile,
                         ::testing::Values(SrtpProfile::aes128_cm_sha1_80, SrtpProfile::aead_aes_128_gcm,
                                           SrtpProfile::aead_aes_256_gcm),
                         [](const auto& info) {
                           return std::string(srtp_profile_name(info.param)).substr(5);
                         });

// Expected bytes from tools/srtp_kat.py: RFC 3711 / RFC 7714 written with Python's AES,
// key derivation checked against RFC 3711 B.3, cross-checked with pylibsrtp.
struct KnownAnswer {
  SrtpProfile profile;
  const char* rtp;
  const char* rtcp;
};

constexpr KnownAnswer kKnownAnswers[] = {
    {SrtpProfile::aes128_cm_sha1_80,
     "806f1234000003e8deadbeef06be8f17937155ff78340677359f9fc528703ab69992e658328613ea015c12",
     "81c90007deadbeef2c84d7778c598521d4f164d2334b042f40275f696cf2c4548000000157a5f83304399ded5aab"},
    {SrtpProfile::aead_aes_128_gcm,
     "806f1234000003e8deadbeefb5369deca102e13dae14c90d9d0297b4c6949e8cb4e4d4362f30cad9e90bb0834591ca0e7d",
     "81c90007deadbeefdd3f6d95a86674a2ebe2f4bfa63e4ca2e0040f8722383ff67377f9e7e6249eafc70804325dca74e88000000"
     "1"},
    {SrtpProfile::aead_aes_256_gcm,
     "806f1234000003e8deadbeefb68e8ebc473a1f1b9ad26191bad70902e23987756f379f2ee8e39f83f1e78e30a8b43f38b8",
     "81c90007deadbeef58358c1705610c0c1e66f90d47b09dc07ad4930bd14e84dd04bdfc66fcde247e3b6f1ca61a4592878000000"
     "1"},
};

TEST(SrtpKnownAnswer, ProtectMatchesIndependentImplementation) {
  for (const KnownAnswer& kat : kKnownAnswers) {
    SCOPED_TRACE(srtp_profile_name(kat.profile));
    SrtpSession sender(kat.profile, Direction::outbound, key_salt_for(kat.profile));
    Packet rtp(kat_rtp(), SrtpSession::max_trailer);
    ASSERT_EQ(sender.protect_rtp(rtp.buffer.data(), rtp.len, rtp.buffer.size()), SrtpError::ok);
    EXPECT_EQ(rtp.bytes(), from_hex(kat.rtp));
    Packet rtcp(kat_rtcp(), SrtpSession::max_trailer);
    ASSERT_EQ(sender.protect_rtcp(rtcp.buffer.data(), rtcp.len, rtcp.buffer.size()), SrtpError::ok);
    EXPECT_EQ(rtcp.bytes(), from_hex(kat.rtcp));

    SrtpSession receiver(kat.profile, Direction::inbound, key_salt_for(kat.profile));
    std::vector<uint8_t> in = from_hex(kat.rtp);
    size_t len = in.size();
    ASSERT_EQ(receiver.unprotect_rtp(in.data(), len), SrtpError::ok);
    in.resize(len);
    EXPECT_EQ(in, kat_rtp());
    in = from_hex(kat.rtcp);
    len = in.size();
    ASSERT_EQ(receiver.unprotect_rtcp(in.data(), len), SrtpError::ok);
    in.resize(len);
    EXPECT_EQ(in, kat_rtcp());
  }
}

TEST(SrtpSession, RejectsKeyMaterialOfTheWrongLength) {
  std::vector<uint8_t> thirty(30, 1);
  EXPECT_THROW(SrtpSession(SrtpProfile::aead_aes_128_gcm, Direction::inbound, thirty), std::runtime_error);
  std::vector<uint8_t> twenty_eight(28, 1);
  EXPECT_THROW(SrtpSession(SrtpProfile::aes128_cm_sha1_80, Direction::inbound, twenty_eight),
               std::runtime_error);
  EXPECT_NO_THROW(SrtpSession(SrtpProfile::aes128_cm_sha1_80, Direction::inbound, thirty));
  EXPECT_THROW(SrtpSession(SrtpProfile::aead_aes_256_gcm, Direction::inbound, twenty_eight),
               std::runtime_error);
  std::vector<uint8_t> forty_four(44, 1);
  EXPECT_NO_THROW(SrtpSession(SrtpProfile::aead_aes_256_gcm, Direction::inbound, forty_four));
}

TEST(SrtpSession, ProfileFacts) {
  EXPECT_EQ(srtp_master_key_length(SrtpProfile::aes128_cm_sha1_80), 16u);
  EXPECT_EQ(srtp_master_salt_length(SrtpProfile::aes128_cm_sha1_80), 14u);
  EXPECT_EQ(srtp_master_salt_length(SrtpProfile::aead_aes_128_gcm), 12u);
  EXPECT_STREQ(srtp_profile_name(SrtpProfile::aead_aes_128_gcm), "SRTP_AEAD_AES_128_GCM");
  EXPECT_STREQ(srtp_profile_name(SrtpProfile::aes128_cm_sha1_80), "SRTP_AES128_CM_SHA1_80");
  EXPECT_EQ(srtp_master_key_length(SrtpProfile::aead_aes_256_gcm), 32u);
  EXPECT_EQ(srtp_master_salt_length(SrtpProfile::aead_aes_256_gcm), 12u);
  EXPECT_EQ(srtp_rtp_trailer_length(SrtpProfile::aead_aes_256_gcm), 16u);
  EXPECT_EQ(srtp_rtcp_trailer_length(SrtpProfile::aead_aes_256_gcm), 20u);
  EXPECT_STREQ(srtp_profile_name(SrtpProfile::aead_aes_256_gcm), "SRTP_AEAD_AES_256_GCM");
  EXPECT_EQ(SrtpSession::max_trailer, 20u);
}

}  // namespace
}  // namespace rtce
