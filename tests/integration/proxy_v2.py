"""PROXY protocol v2 (DGRAM, and STREAM for ICE-TCP flows; PROXY command) encode/parse for the
integration test.

Mirrors wire/rtce_proxy_v2.h: the header names the FLOW (source = client address:port,
destination = the VIP address:port the client sent to) in both directions; a transceiver
answers by echoing the header it received. Standard library only.
"""

import ipaddress
import struct
from dataclasses import dataclass

SIGNATURE = b"\x0d\x0a\x0d\x0a\x00\x0d\x0a\x51\x55\x49\x54\x0a"
VER_CMD_PROXY = 0x21
VER_CMD_LOCAL = 0x20
FAM_INET_DGRAM = 0x12
FAM_INET6_DGRAM = 0x22
FAM_INET_STREAM = 0x11
FAM_INET6_STREAM = 0x21
FIXED_LEN = 16
LEN_V4 = FIXED_LEN + 12  # 28
LEN_V6 = FIXED_LEN + 36  # 52


class ProxyV2Error(ValueError):
    pass


@dataclass(frozen=True)
class ProxyHeader:
    family: int  # 4 or 6
    client_ip: str
    client_port: int
    vip_ip: str
    vip_port: int
    transport: str = "udp"  # "tcp" for a STREAM header (an ICE-TCP flow)

    @property
    def client(self):
        return (self.client_ip, self.client_port)

    @property
    def vip(self):
        return (self.vip_ip, self.vip_port)


def encode(client, vip):
    """PROXY v2 header for the flow client=(ip, port) -> vip=(ip, port)."""
    cip = ipaddress.ip_address(client[0])
    vip_ip = ipaddress.ip_address(vip[0])
    if cip.version != vip_ip.version:
        raise ProxyV2Error("client and VIP must be the same family")
    fam = FAM_INET_DGRAM if cip.version == 4 else FAM_INET6_DGRAM
    block = cip.packed + vip_ip.packed + struct.pack("!HH", client[1], vip[1])
    return SIGNATURE + bytes([VER_CMD_PROXY, fam]) + struct.pack("!H", len(block)) + block


def parse(data):
    """Returns (ProxyHeader, payload_offset); raises ProxyV2Error when not a valid header.
    TLVs after the address block are skipped, as the relay does."""
    if len(data) < FIXED_LEN:
        raise ProxyV2Error("truncated: %d bytes" % len(data))
    if data[:12] != SIGNATURE:
        raise ProxyV2Error("bad signature")
    if data[12] & 0xF0 != 0x20:
        raise ProxyV2Error("bad version")
    if data[12] != VER_CMD_PROXY:
        raise ProxyV2Error("not a PROXY command")
    transport = "tcp" if data[13] in (FAM_INET_STREAM, FAM_INET6_STREAM) else "udp"
    if data[13] in (FAM_INET_DGRAM, FAM_INET_STREAM):
        alen, family = 4, 4
    elif data[13] in (FAM_INET6_DGRAM, FAM_INET6_STREAM):
        alen, family = 16, 6
    else:
        raise ProxyV2Error("unsupported family 0x%02x" % data[13])
    (block,) = struct.unpack_from("!H", data, 14)
    if block < 2 * alen + 4:
        raise ProxyV2Error("address block too short")
    if len(data) < FIXED_LEN + block:
        raise ProxyV2Error("truncated address block")
    p = FIXED_LEN
    cip = ipaddress.ip_address(bytes(data[p:p + alen]))
    vip = ipaddress.ip_address(bytes(data[p + alen:p + 2 * alen]))
    cport, vport = struct.unpack_from("!HH", data, p + 2 * alen)
    return ProxyHeader(family, str(cip), cport, str(vip), vport, transport), FIXED_LEN + block
