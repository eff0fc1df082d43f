#!/usr/bin/python3
"""test_media_drops.py — hostile datagrams on a live session's path are dropped *and counted*,
and unauthenticated checks are answered at most at the configured rate.

Black box: a real rtcedge-transceiver (direct mode), a session from a real Chromium offer
(tests/transceiver/sdp/fixtures), and a plain UDP socket that authenticates one Binding
request with the answer's ice-pwd (HMAC-SHA1 and CRC-32 from the standard library), so that
its address is the session's path. Then, from that path:
  - datagrams in the DTLS range that are not DTLS records -> `dtls_rejected`, one each;
  - datagrams longer than the 2048-byte receive buffer -> `truncated`, one each;
  - checks with a wrong MESSAGE-INTEGRITY -> at most the configured burst of 401 replies.
And in relay mode, a check framed with a PROXY v2 header that a relay padded for UDP GSO (a
NOOP TLV) is answered, with the flow's header unpadded (docs/wire-format.md, "Padding").
Standard library only. Exit 0 pass, 1 fail.
"""

import argparse
import hmac
import os
import re
import socket
import struct
import subprocess
import sys
import tempfile
import unittest
import urllib.request
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "support", "py"))
from rtcetest.core import free_port, wait_for  # noqa: E402

FIXTURE = os.path.join(HERE, "..", "sdp", "fixtures", "chrome_audio_offer.sdp")
ARGS = None


def stun_binding(username, key, txid, use_candidate=True, corrupt_mac=False):
    """A Binding request as a controlling browser sends it: USERNAME, PRIORITY,
    ICE-CONTROLLING, USE-CANDIDATE, MESSAGE-INTEGRITY, FINGERPRINT."""
    def attr(t, v):
        return struct.pack("!HH", t, len(v)) + v + b"\0" * ((4 - len(v) % 4) % 4)

    body = attr(0x0006, username.encode()) + attr(0x0024, struct.pack("!I", 0x6E7FFFFF))
    body += attr(0x802A, b"\x01" * 8)
    if use_candidate:
        body += attr(0x0025, b"")
    header = lambda n: struct.pack("!HHI", 0x0001, n, 0x2112A442) + txid  # noqa: E731
    mac = hmac.new(key.encode(), header(len(body) + 24) + body, "sha1").digest()
    if corrupt_mac:
        mac = bytes([mac[0] ^ 1]) + mac[1:]
    body += attr(0x0008, mac)
    crc = zlib.crc32(header(len(body) + 8) + body) ^ 0x5354554E
    body += attr(0x8028, struct.pack("!I", crc))
    return header(len(body)) + body


def drops(metrics, reason):
    m = re.search(r'^rtcedge_transceiver_datagrams_dropped_total\{reason="%s"\} (\S+)$' % reason, metrics, re.M)
    return float(m.group(1)) if m else 0.0


def create_session(test, http_port):
    """POSTs the fixture offer; (the ICE USERNAME a client check carries, the server's pwd)."""
    with open(FIXTURE) as f:
        offer = f.read()
    req = urllib.request.Request("http://127.0.0.1:%d/v1/sessions" % http_port, data=offer.encode(),
                                 headers={"Content-Type": "application/sdp"}, method="POST")
    with urllib.request.urlopen(req, timeout=5) as r:
        test.assertEqual(r.status, 201)
        answer = r.read().decode()
    server_ufrag = re.search(r"a=ice-ufrag:(\S+)", answer).group(1)
    server_pwd = re.search(r"a=ice-pwd:(\S+)", answer).group(1)
    client_ufrag = re.search(r"a=ice-ufrag:(\S+)", offer).group(1)
    return "%s:%s" % (server_ufrag, client_ufrag), server_pwd


class MediaDrops(unittest.TestCase):
    def setUp(self):
        self.http_port, self.media_port = free_port(), free_port(socket.SOCK_DGRAM)
        self.log = tempfile.NamedTemporaryFile(prefix="rtce-drops-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([ARGS.transceiver, "--http-listen", "127.0.0.1:%d" % self.http_port,
                                      "--workers", "1", "--media-listen", "127.0.0.1", "--media-base-port",
                                      str(self.media_port), "--sessions-stun-error-replies-per-second", "3"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.addCleanup(self.stop)
        wait_for(lambda: self.get("/healthz")[0] == 200, 15, "transceiver /healthz")
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(2)
        self.addCleanup(self.sock.close)

    def stop(self):
        self.proc.kill()
        self.proc.wait(timeout=10)
        os.unlink(self.log.name)

    def get(self, path):
        try:
            with urllib.request.urlopen("http://127.0.0.1:%d%s" % (self.http_port, path), timeout=3) as r:
                return r.status, r.read().decode()
        except OSError:
            return 0, ""

    def live_path(self):
        self.username, self.key = create_session(self, self.http_port)
        self.sock.sendto(stun_binding(self.username, self.key, os.urandom(12)), ("127.0.0.1", self.media_port))
        reply, _ = self.sock.recvfrom(2048)
        self.assertEqual(reply[0:2], b"\x01\x01", "the check was not answered with a success")

    def test_garbage_dtls_and_oversized_datagrams_are_counted(self):
        self.live_path()
        before = self.get("/metrics")[1]
        for i in range(200):  # first byte 22 (DTLS handshake range), not a record sequence
            self.sock.sendto(bytes([22, 0xFE]) + os.urandom(5), ("127.0.0.1", self.media_port))
        for i in range(20):
            self.sock.sendto(b"\x80" + b"\0" * 3000, ("127.0.0.1", self.media_port))

        def counted():
            m = self.get("/metrics")[1]
            return (drops(m, "dtls_rejected") - drops(before, "dtls_rejected") >= 200
                    and drops(m, "truncated") - drops(before, "truncated") >= 20)
        wait_for(counted, 10, "200 dtls_rejected and 20 truncated drops")

    def test_unauthenticated_checks_get_a_bounded_number_of_replies(self):
        self.live_path()
        self.sock.settimeout(0.3)
        for _ in range(100):
            self.sock.sendto(stun_binding(self.username, self.key, os.urandom(12), corrupt_mac=True),
                             ("127.0.0.1", self.media_port))
        replies = 0
        try:
            while True:
                data, _ = self.sock.recvfrom(2048)
                replies += data[0:2] == b"\x01\x11"  # Binding error response
        except socket.timeout:
            pass
        # A burst of 3, plus what the limiter refills while the 100 checks arrive (well under 1 s).
        self.assertGreaterEqual(replies, 1)
        self.assertLessEqual(replies, 6, "unauthenticated checks were answered %d times" % replies)
        wait_for(lambda: re.search(r"^rtcedge_transceiver_stun_error_replies_suppressed_total (\S+)$",
                                   self.get("/metrics")[1], re.M), 5, "the suppressed-replies counter")


def proxy_v2(client, vip, pad=0):
    """PROXY v2 (PROXY, INET over DGRAM) for client -> vip, padded by a `pad`-byte NOOP TLV."""
    block = socket.inet_aton(client[0]) + socket.inet_aton(vip[0]) + struct.pack("!HH", client[1], vip[1])
    if pad:
        block += struct.pack("!BH", 0x04, pad - 3) + b"\0" * (pad - 3)
    return b"\r\n\r\n\0\r\nQUIT\n" + bytes([0x21, 0x12]) + struct.pack("!H", len(block)) + block


class RelayFraming(unittest.TestCase):
    def setUp(self):
        self.http_port, self.media_port = free_port(), free_port(socket.SOCK_DGRAM)
        self.keys = tempfile.NamedTemporaryFile("w", prefix="rtce-keys-", suffix=".yaml", delete=False)
        self.keys.write("keys:\n  - id: 1\n    secret: %s\n" % os.urandom(16).hex())
        self.keys.close()
        os.chmod(self.keys.name, 0o600)
        self.log = tempfile.NamedTemporaryFile(prefix="rtce-framing-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([ARGS.transceiver, "--http-listen", "127.0.0.1:%d" % self.http_port,
                                      "--workers", "1", "--media-listen", "127.0.0.1", "--media-base-port",
                                      str(self.media_port), "--relay-vips", "127.0.0.1:3478",
                                      "--relay-sources", "127.0.0.0/8", "--direct-enabled", "false",
                                      "--hint-key-file", self.keys.name],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.addCleanup(self.stop)
        wait_for(lambda: MediaDrops.get(self, "/healthz")[0] == 200, 15, "transceiver /healthz")
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(3)
        self.addCleanup(self.sock.close)

    def stop(self):
        self.proc.kill()
        self.proc.wait(timeout=10)
        os.unlink(self.log.name)
        os.unlink(self.keys.name)

    def get(self, path):
        return MediaDrops.get(self, path)

    def test_a_noop_padded_header_is_answered_with_the_flows_header_unpadded(self):
        username, server_pwd = create_session(self, self.http_port)
        client, vip = ("198.51.100.7", 50000), ("127.0.0.1", 3478)
        header = proxy_v2(client, vip)
        for pad in (37, 3):  # what the relay adds to reach a size class; the smallest TLV
            txid = os.urandom(12)
            check = stun_binding(username, server_pwd, txid)
            self.sock.sendto(proxy_v2(client, vip, pad) + check, ("127.0.0.1", self.media_port))
            # The answer, and once connected the DTLS flight too: every reply names the flow
            # with the header unpadded.
            answered = False
            while not answered:
                reply, _ = self.sock.recvfrom(2048)
                self.assertEqual(reply[:len(header)], header, "the flow's header, without the padding")
                body = reply[len(header):]
                answered = body[0:2] == b"\x01\x01" and body[8:20] == txid
        self.assertEqual(drops(self.get("/metrics")[1], "bad_framing"), 0)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--transceiver", required=True)
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
