#!/usr/bin/python3
"""demo_probe.py — one ICE-style exchange through the demo relay, printed step by step.

Sends a STUN Binding request whose server ufrag carries the routing hint, checks the
Binding success response (MESSAGE-INTEGRITY, FINGERPRINT, XOR-MAPPED-ADDRESS) comes back
from the VIP, then sends RTP-like datagrams that follow the flow. Exits 0 on success."""

import argparse
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
import stun_codec  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vip", default="127.0.0.1:3478")
    ap.add_argument("--ufrag", required=True)
    ap.add_argument("--pwd", required=True)
    args = ap.parse_args()
    host, port = args.vip.rsplit(":", 1)
    vip = (host, int(port))

    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(2.0)
    print(f"client {sock.getsockname()[0]}:{sock.getsockname()[1]} -> VIP {args.vip}")

    txid, request = stun_codec.binding_request(args.ufrag, "demo", args.pwd)
    sock.sendto(request, vip)
    print(f"  sent STUN Binding request, USERNAME {args.ufrag}:demo ({len(request)} bytes)")
    data, source = sock.recvfrom(2048)
    reply = stun_codec.parse(data)
    ok = (reply.msg_type == stun_codec.BINDING_SUCCESS and reply.txid == txid
          and reply.integrity_ok(args.pwd.encode()))
    mapped = reply.xor_mapped_address()
    print(f"  got Binding success from {source[0]}:{source[1]}: integrity {'ok' if ok else 'BAD'}, "
          f"XOR-MAPPED-ADDRESS {mapped[0]}:{mapped[1]}")
    if not ok or source != vip:
        return 1

    for seq in range(3):
        payload = bytes([0x80, 0x6F, 0, seq]) + b"rtp payload"
        sock.sendto(payload, vip)
        echo, source = sock.recvfrom(2048)
        print(f"  RTP seq {seq} -> echoed by {echo.split(b':', 1)[0].decode()} from {source[0]}:{source[1]}")
        if source != vip or not echo.endswith(payload):
            return 1
    print("demo probe: the flow reached its transceiver endpoint and came back from the VIP")
    return 0


if __name__ == "__main__":
    sys.exit(main())
