#!/usr/bin/env python3
"""srtp_kat.py — known-answer SRTP/SRTCP packets for srtp_session_test.cpp, computed
independently of libsrtp: RFC 3711 (AES-CM key derivation, AES-CM + HMAC-SHA1-80) and
RFC 7714 (AEAD_AES_128_GCM, AEAD_AES_256_GCM) written out with the `cryptography` package's AES primitives.
The key derivation is first checked against RFC 3711 Appendix B.3. When pylibsrtp is
installed (Debian: python3-pylibsrtp) the packets are cross-checked with it as well.

Run with /usr/bin/python3; prints the hex the C++ test embeds."""
import hashlib
import hmac
import struct

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM


def aes_ctr(key: bytes, iv: bytes, length: int) -> bytes:
    encryptor = Cipher(algorithms.AES(key), modes.CTR(iv)).encryptor()
    return encryptor.update(bytes(length)) + encryptor.finalize()


def xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b))


def derive(master_key: bytes, master_salt: bytes, label: int, length: int) -> bytes:
    """RFC 3711 4.3.1 with key_derivation_rate 0; a 12-byte (GCM) salt is zero-padded to 14."""
    salt = master_salt.ljust(14, b"\0")
    key_id = bytes(7) + bytes([label]) + bytes(6)
    x = xor(key_id, salt)
    return aes_ctr(master_key, x + b"\0\0", length)


def check_rfc3711_b3():
    key = bytes.fromhex("E1F97A0D3E018BE0D64FA32C06DE4139")
    salt = bytes.fromhex("0EC675AD498AFEEBB6960B3AABE6")
    assert derive(key, salt, 0, 16).hex().upper() == "C61E7A93744F39EE10734AFE3FF7A087"
    assert derive(key, salt, 2, 14).hex().upper() == "30CBBC08863D8C85D49DB34A9AE1"
    assert derive(key, salt, 1, 20).hex().upper() == "CEBE321F6FF7716B6FD4AB49AF256A156D38BAA4"


def cm_sha1_80_rtp(master_key, master_salt, packet, roc=0):
    k_e, k_a, k_s = (derive(master_key, master_salt, l, n) for l, n in ((0, 16), (1, 20), (2, 14)))
    ssrc = packet[8:12]
    seq = packet[2:4]
    iv = bytearray(k_s + b"\0\0")
    index = struct.pack(">I", roc) + seq  # 48-bit packet index
    iv = xor(iv, bytes(4) + ssrc + bytes(8))
    iv = xor(iv, bytes(8) + index + b"\0\0")
    header, payload = packet[:12], packet[12:]
    encrypted = header + xor(payload, aes_ctr(k_e, iv, len(payload)))
    tag = hmac.new(k_a, encrypted + struct.pack(">I", roc), hashlib.sha1).digest()[:10]
    return encrypted + tag


def cm_sha1_80_rtcp(master_key, master_salt, packet, index):
    k_e, k_a, k_s = (derive(master_key, master_salt, l, n) for l, n in ((3, 16), (4, 20), (5, 14)))
    ssrc = packet[4:8]
    iv = xor(k_s + b"\0\0", bytes(4) + ssrc + bytes(8))
    iv = xor(iv, bytes(8) + struct.pack(">HI", 0, index) + b"\0\0")
    header, payload = packet[:8], packet[8:]
    encrypted = header + xor(payload, aes_ctr(k_e, iv, len(payload))) + struct.pack(">I", 0x80000000 | index)
    return encrypted + hmac.new(k_a, encrypted, hashlib.sha1).digest()[:10]


def gcm_rtp(master_key, master_salt, packet, roc=0):
    # The session key is as long as the master key (RFC 7714 §11); AES-256-CM derives it.
    k_e, k_s = derive(master_key, master_salt, 0, len(master_key)), derive(master_key, master_salt, 2, 12)
    iv = xor(bytes(2) + packet[8:12] + struct.pack(">I", roc) + packet[2:4], k_s)
    return packet[:12] + AESGCM(k_e).encrypt(iv, packet[12:], packet[:12])


def gcm_rtcp(master_key, master_salt, packet, index):
    k_e, k_s = derive(master_key, master_salt, 3, len(master_key)), derive(master_key, master_salt, 5, 12)
    iv = xor(bytes(2) + packet[4:8] + bytes(2) + struct.pack(">I", index), k_s)
    trailer = struct.pack(">I", 0x80000000 | index)
    return packet[:8] + AESGCM(k_e).encrypt(iv, packet[8:], packet[:8] + trailer) + trailer


# The fixed inputs, also spelled out in srtp_session_test.cpp.
MASTER_KEY = bytes(range(1, 17))
MASTER_KEY_256 = bytes(range(1, 33))
CM_SALT = bytes(range(0xA0, 0xAE))
GCM_SALT = bytes(range(0xB0, 0xBC))
RTP = bytes.fromhex("80 6f 12 34 00 00 03 e8 de ad be ef".replace(" ", "")) + b"rtcedge opus payload!"
RTCP = bytes.fromhex("81 c9 00 07 de ad be ef".replace(" ", "")) + bytes(range(0x10, 0x28))
RTCP_INDEX = 1  # libsrtp's first SRTCP index


def main():
    check_rfc3711_b3()
    results = {
        "cm_rtp": cm_sha1_80_rtp(MASTER_KEY, CM_SALT, RTP),
        "cm_rtcp": cm_sha1_80_rtcp(MASTER_KEY, CM_SALT, RTCP, RTCP_INDEX),
        "gcm_rtp": gcm_rtp(MASTER_KEY, GCM_SALT, RTP),
        "gcm_rtcp": gcm_rtcp(MASTER_KEY, GCM_SALT, RTCP, RTCP_INDEX),
        "gcm256_rtp": gcm_rtp(MASTER_KEY_256, GCM_SALT, RTP),
        "gcm256_rtcp": gcm_rtcp(MASTER_KEY_256, GCM_SALT, RTCP, RTCP_INDEX),
    }
    try:
        import pylibsrtp

        for name, profile, key in (
                ("cm", pylibsrtp.Policy.SRTP_PROFILE_AES128_CM_SHA1_80, MASTER_KEY + CM_SALT),
                ("gcm", pylibsrtp.Policy.SRTP_PROFILE_AEAD_AES_128_GCM, MASTER_KEY + GCM_SALT),
                ("gcm256", pylibsrtp.Policy.SRTP_PROFILE_AEAD_AES_256_GCM, MASTER_KEY_256 + GCM_SALT)):
            policy = pylibsrtp.Policy(key=key, ssrc_type=pylibsrtp.Policy.SSRC_ANY_OUTBOUND,
                                      srtp_profile=profile)
            session = pylibsrtp.Session(policy)
            assert session.protect(RTP) == results[name + "_rtp"], name + " rtp differs from pylibsrtp"
            assert session.protect_rtcp(RTCP) == results[name + "_rtcp"], name + " rtcp differs from pylibsrtp"
        print("# cross-checked with pylibsrtp")
    except ImportError:
        print("# pylibsrtp not installed: not cross-checked")
    for name, data in results.items():
        print(f"{name} = {data.hex()}")


if __name__ == "__main__":
    main()
