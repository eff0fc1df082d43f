#!/usr/bin/python3
"""spoofed_stun_flood.py — a spoofed-source STUN flood for test_stun_flood_netns.py, run
inside the client namespace (it needs CAP_NET_RAW). Standard library only.

Through one IPPROTO_RAW socket (so IP_HDRINCL: it writes the whole IPv4 header) it sends, as
fast as one Python thread can, pre-built IPv4/UDP datagrams to --dst whose source addresses
and ports are random within --spoof-prefix (skipping --avoid prefixes, the topology's own
links), and whose payloads are, in turn: Binding requests with random ufrags, with forged
hints (a valid hint with one character changed), with each --valid-ufrag replayed, and
random bytes. It stops after --seconds or --max-packets, whichever comes first, and prints
one JSON line: {"sent": N, "seconds": T, "errors": E}."""

import argparse
import ipaddress
import json
import os
import random
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stun_codec as stun  # noqa: E402

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def ipv4_udp(src, sport, dst, dport, payload):
    # UDP checksum 0 (none; allowed over IPv4). The kernel fills the IP checksum and length.
    udp = struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(udp), 0, 0, 64, socket.IPPROTO_UDP, 0,
                     src.packed, dst.packed)
    return ip + udp


def payloads(rng, valid_ufrags):
    def request(ufrag):
        username = (ufrag + ":" + "".join(rng.choice(ALPHABET) for _ in range(4))).encode()
        return stun.encode(stun.BINDING_REQUEST, rng.randbytes(12), [(stun.ATTR_USERNAME, username)],
                           integrity_key=b"x" * 22)

    kinds = [lambda: request("".join(rng.choice(ALPHABET) for _ in range(16)))]
    for v in valid_ufrags:
        i = rng.randrange(len(v))
        kinds.append(lambda v=v, i=i: request(v[:i] + ("A" if v[i] != "A" else "B") + v[i + 1:]))
        kinds.append(lambda v=v: request(v))
    kinds.append(lambda: rng.randbytes(rng.randint(1, 200)))
    return kinds


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dst", required=True, help="IPv4:port")
    ap.add_argument("--spoof-prefix", default="198.18.0.0/15")
    ap.add_argument("--avoid", action="append", default=[], help="prefix never used as a source")
    ap.add_argument("--valid-ufrag", action="append", default=[])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--max-packets", type=int, default=5_000_000)
    ap.add_argument("--distinct", type=int, default=20000, help="pre-built datagrams, sent round robin")
    ap.add_argument("--seed", type=int, default=16)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    dst_ip, dst_port = a.dst.rsplit(":", 1)
    dst, dport = ipaddress.IPv4Address(dst_ip), int(dst_port)
    net = ipaddress.IPv4Network(a.spoof_prefix)
    avoid = [ipaddress.IPv4Network(p) for p in a.avoid]
    kinds = payloads(rng, a.valid_ufrag)
    packets = []
    while len(packets) < a.distinct:
        src = net[rng.randrange(net.num_addresses)]
        if any(src in p for p in avoid):
            continue
        packets.append(ipv4_udp(src, rng.randint(1024, 65535), dst, dport, kinds[len(packets) % len(kinds)]()))
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    target = (str(dst), 0)
    sent = errors = k = 0
    n = len(packets)
    started = time.monotonic()
    deadline = started + a.seconds
    sendto = s.sendto
    while k < a.max_packets:
        # The clock is read once per 1000 datagrams: the loop is the sender's whole cost.
        for _ in range(1000):
            try:
                sendto(packets[k % n], target)
                sent += 1
            except OSError:  # the socket buffer is full (ENOBUFS): that datagram is lost
                errors += 1
            k += 1
        if time.monotonic() >= deadline:
            break
    print(json.dumps({"sent": sent, "errors": errors, "seconds": time.monotonic() - started}), flush=True)


if __name__ == "__main__":
    main()
