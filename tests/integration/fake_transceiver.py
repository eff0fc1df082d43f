#!/usr/bin/python3
"""A fake transceiver for the relay integration test, run inside the transceiver
namespace. Standard library only.

It binds one dual-stack UDP socket per endpoint (--endpoint NAME=PORT, repeatable) and,
for every datagram from a relay:
  * parses the PROXY v2 header (wire/rtce_proxy_v2.h);
  * a STUN Binding request whose MESSAGE-INTEGRITY verifies with one of the --pwd values
    is answered with a real Binding success response: XOR-MAPPED-ADDRESS = the client
    address from the PROXY header, SOFTWARE = "rtce-fake-transceiver <NAME>",
    MESSAGE-INTEGRITY (same pwd) and FINGERPRINT;
  * any other payload is echoed as NAME + b":" + payload;
  * the answer carries the same PROXY header and goes back to the sender address, from
    the socket it arrived on (so from the endpoint address the relay knows).
Each event is printed to stdout as one JSON line; the test reads them to see which
endpoint got what. It exits on SIGTERM, when its parent dies, or after --max-seconds."""

import argparse
import ctypes
import ipaddress
import json
import os
import selectors
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import proxy_v2  # noqa: E402
import stun_codec  # noqa: E402


def emit(**event):
    sys.stdout.write(json.dumps(event, sort_keys=True) + "\n")
    sys.stdout.flush()


def plain(addr):
    """(host, port) with IPv4-mapped IPv6 shown as IPv4."""
    ip = ipaddress.ip_address(addr[0].split("%")[0])
    if ip.version == 6 and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return [str(ip), addr[1]]


def handle(name, sock, data, sender, pwds):
    base = {"ep": name, "from": plain(sender), "len": len(data)}
    try:
        hdr, off = proxy_v2.parse(data)
    except proxy_v2.ProxyV2Error as e:
        emit(event="bad_frame", error=str(e), **base)
        return
    framing, payload = data[:off], data[off:]
    base.update(family=hdr.family, client=list(hdr.client), vip=list(hdr.vip), transport=hdr.transport)
    if stun_codec.looks_like_stun(payload):
        try:
            msg = stun_codec.parse(payload)
        except stun_codec.StunError as e:
            emit(event="stun_malformed", error=str(e), **base)
            return
        if msg.msg_type != stun_codec.BINDING_REQUEST:
            emit(event="stun_ignored", msg_type=msg.msg_type, **base)
            return
        pwd = next((p for p in pwds if msg.integrity_ok(p.encode())), None)
        if pwd is None or msg.fingerprint_ok() is False:
            emit(event="stun_rejected", username=msg.username(), **base)
            return
        resp = stun_codec.binding_success(msg.txid, hdr.client_ip, hdr.client_port, pwd,
                                          software="rtce-fake-transceiver " + name)
        sock.sendto(framing + resp, sender)
        emit(event="stun", username=msg.username(), txid=msg.txid.hex(), **base)
        return
    sock.sendto(framing + name.encode() + b":" + payload, sender)
    emit(event="data", payload=payload.hex(), **base)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--endpoint", action="append", required=True, help="NAME=PORT, e.g. EP1=40001")
    ap.add_argument("--pwd", action="append", required=True, help="ICE pwd accepted for MESSAGE-INTEGRITY")
    ap.add_argument("--bind", default="::", help="dual-stack address to bind (default ::)")
    ap.add_argument("--max-seconds", type=float, default=300.0)
    args = ap.parse_args()

    # Die with the test process, whatever happens to it.
    ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    sel = selectors.DefaultSelector()
    ports = {}
    for item in args.endpoint:
        name, port = item.split("=", 1)
        s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        s.bind((args.bind, int(port)))
        # Room for a burst while this process waits for a CPU (a relay loading its program
        # verifies it on the same two cores): the tests count every datagram, the kernel's
        # default buffer holds ~100 ms of their 2k pps streams.
        try:
            s.setsockopt(socket.SOL_SOCKET, 33, 8 << 20)  # SO_RCVBUFFORCE (root)
        except OSError:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
        s.setblocking(False)
        sel.register(s, selectors.EVENT_READ, name)
        ports[name] = int(port)
    emit(event="ready", endpoints=ports, pid=os.getpid())

    deadline = time.monotonic() + args.max_seconds
    while time.monotonic() < deadline:
        for key, _ in sel.select(timeout=1.0):
            sock = key.fileobj
            for _ in range(64):  # bounded drain per wakeup
                try:
                    data, sender = sock.recvfrom(65535)
                except BlockingIOError:
                    break
                handle(key.data, sock, data, sender, args.pwd)
    emit(event="timeout")


if __name__ == "__main__":
    main()
