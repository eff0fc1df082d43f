#!/usr/bin/python3
"""test_replayed_check.py — a captured nominating check, re-sent from another source port,
must not steer a live call's media (the path-hijack defect).

A real aiortc call to a real rtcedge-transceiver (direct mode, echo backend) goes through a
small UDP forwarder on 127.0.0.2 (the transceiver advertises 127.0.0.2 as its candidate). The
forwarder copies the client's first nominating Binding request (USE-CANDIDATE) and, once
audio flows, sends that copy once from a second socket, as an on-path attacker would. The
second socket forwards nothing: if the session moved its media there, the client hears
nothing more. Asserted: the client keeps receiving echoed audio after the replay, the
session's client address is still the forwarder's real one, and the replay is counted
(`stun_replayed`).

Exit 0 pass, 1 fail (also when python3-aiortc or python3-numpy is missing). Everything is stopped on exit.
"""

import argparse
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
AIORTC_CLIENT = os.path.join(HERE, "aiortc_client.py")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support", "py"))
from rtcetest import outcome  # noqa: E402
from rtcetest.core import free_port, wait_for  # noqa: E402

USE_CANDIDATE = 0x0025


def stun_attributes(data):
    """Attribute types of a STUN message (bounded walk), or None if it is not STUN."""
    if len(data) < 20 or data[0] > 3 or data[4:8] != b"\x21\x12\xa4\x42":
        return None
    types, off, end = [], 20, min(len(data), 20 + int.from_bytes(data[2:4], "big"))
    while off + 4 <= end and len(types) < 64:
        t, n = int.from_bytes(data[off:off + 2], "big"), int.from_bytes(data[off + 2:off + 4], "big")
        types.append(t)
        off += 4 + ((n + 3) & ~3)
    return types


class Forwarder(threading.Thread):
    """client <-> 127.0.0.2:port <-> upstream socket <-> transceiver; plus a replay socket."""

    def __init__(self, listen_port, transceiver):
        super().__init__(daemon=True)
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind(("127.0.0.2", listen_port))
        self.up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.up.bind(("127.0.0.2", 0))
        self.replayer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.replayer.bind(("127.0.0.2", 0))
        self.transceiver = transceiver
        self.client = None
        self.captured = None
        self.captured_at = None
        self.replayed_at = None
        self.to_server = 0
        self.to_client = 0
        self.at_replayer = 0
        self.stop = threading.Event()

    def upstream_address(self):
        return "%s:%d" % self.up.getsockname()

    def run(self):
        socks = [self.front, self.up, self.replayer]
        while not self.stop.is_set():
            ready, _, _ = select.select(socks, [], [], 0.05)
            for s in ready:
                data, addr = s.recvfrom(4096)
                if s is self.front:
                    self.client = addr
                    attrs = stun_attributes(data)
                    if self.captured is None and attrs and data[0:2] == b"\x00\x01" and USE_CANDIDATE in attrs:
                        self.captured, self.captured_at = data, time.monotonic()
                    self.up.sendto(data, self.transceiver)
                    self.to_server += 1
                elif s is self.up:
                    if self.client:
                        self.front.sendto(data, self.client)
                        self.to_client += 1
                else:
                    self.at_replayer += 1  # what a hijacked path would deliver: dropped here
            # The replay, once, 2 s after the capture (audio is flowing by then).
            if self.captured and self.replayed_at is None and time.monotonic() - self.captured_at > 2.0:
                self.replayer.sendto(self.captured, self.transceiver)
                self.replayed_at = time.monotonic()

    def close(self):
        self.stop.set()
        self.join(timeout=5)
        for s in (self.front, self.up, self.replayer):
            s.close()


def metric(url, name, labels):
    with urllib.request.urlopen(url + "/metrics", timeout=3) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + "{") and all(('%s="%s"' % kv) in line for kv in labels.items()):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transceiver", required=True)
    args = ap.parse_args()
    code = outcome.unmet(outcome.require_aiortc)
    if code is not None:
        return code

    http_port, media_port = free_port(), free_port(socket.SOCK_DGRAM)
    url = "http://127.0.0.1:%d" % http_port
    workdir = tempfile.mkdtemp(prefix="rtcedge-replay-")
    log_path = os.path.join(workdir, "transceiver.log")
    log = open(log_path, "wb")
    proc = subprocess.Popen([args.transceiver, "--http-listen", "127.0.0.1:%d" % http_port, "--workers", "1",
                             "--media-listen", "127.0.0.1", "--media-base-port", str(media_port),
                             "--media-advertise-address", "127.0.0.2", "--backend-echo-mode", "loopback"],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    forwarder = Forwarder(media_port, ("127.0.0.1", media_port))
    forwarder.start()
    ok = False
    try:
        def ready():
            try:
                with urllib.request.urlopen(url + "/readyz", timeout=1) as r:
                    return r.status == 200
            except OSError:
                return False
        wait_for(ready, 15, "transceiver /readyz")
        client = subprocess.run([sys.executable, AIORTC_CLIENT, "--url", url, "--seconds", "7",
                                 "--include-loopback", "yes", "--expect-frames-after-s", "4.5"],
                                capture_output=True, timeout=90)
        result = json.loads(client.stdout.decode() or "{}")
        session = result.get("session", {})
        checks = {
            "the call connected": result.get("connected") is True,
            "the forwarder replayed a captured nominating check": forwarder.replayed_at is not None,
            "echoed audio kept arriving after the replay (frames_after_s >= 50)":
                result.get("frames_after_s", 0) >= 50,
            "the session's client address is still the real one (%s), got %s" % (
                forwarder.upstream_address(), session.get("client_address")):
                session.get("client_address") == forwarder.upstream_address(),
            "the replay was counted as stun_replayed":
                metric(url, "rtcedge_transceiver_datagrams_dropped_total", {"reason": "stun_replayed"}) >= 1,
        }
        for what, passed in checks.items():
            print("%s: %s" % ("ok" if passed else "FAIL", what))
        print("forwarder: %d to server, %d to client, %d at the replay socket; client frames %s, after %s" % (
            forwarder.to_server, forwarder.to_client, forwarder.at_replayer, result.get("frames_received"),
            result.get("frames_after_s")))
        ok = all(checks.values())
        if not ok:
            sys.stderr.write(client.stdout.decode()[-3000:] + client.stderr.decode()[-2000:])
    finally:
        forwarder.close()
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        if not ok:
            with open(log_path, "rb") as f:
                sys.stderr.write(f.read().decode("utf-8", "replace")[-3000:])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
