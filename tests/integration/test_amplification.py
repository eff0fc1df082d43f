#!/usr/bin/python3
"""test_amplification.py — neither data path can be used as a reflector (issue 16 §3),
on loopback with the real binaries (no root needed):

  Relay: rtcedge-relay (userspace) never answers a client. Binding requests with valid,
  forged, foreign-key and unknown-endpoint hints, STUN without USERNAME, responses,
  garbage, DTLS- and RTP-looking bytes, and forged PROXY v2 frames sent to the return port
  (naming a victim socket as the client) — nothing ever reaches the senders or the victim,
  while the relay's drop counters (and, for the valid hint, the silent endpoint) show that
  every datagram arrived.

  Transceiver: every reply to an unauthenticated datagram sent to its media port is no
  larger than the datagram it answers (a wrong MESSAGE-INTEGRITY, no MESSAGE-INTEGRITY,
  a wrong or unknown ufrag, minimal requests, unknown attributes), and with the default
  sessions.stun_error_replies_per_second the number of error replies a session sends is
  bounded by that rate, whatever arrives: total reply bytes stay far below request bytes.

Standard library only. Exit 0 pass, 1 fail.
"""

import argparse
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "support", "py"))
sys.path.insert(0, HERE)
import prom_metrics  # noqa: E402
from rtcetest.core import free_port, wait_for  # noqa: E402
import proxy_v2  # noqa: E402
import stun_codec as stun  # noqa: E402

FIXTURE = os.path.join(HERE, "..", "transceiver", "sdp", "fixtures", "chrome_audio_offer.sdp")
ARGS = None
FIGURES = []
QUIET_S = 1.0  # how long "nothing came back" is watched for after the last datagram


def udp_socket(timeout=0.2):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    s.settimeout(timeout)
    return s


def drain(sock, until):
    """Every datagram sock receives before monotonic time `until`."""
    got = []
    while True:
        left = until - time.monotonic()
        if left <= 0:
            return got
        sock.settimeout(left)
        try:
            got.append(sock.recvfrom(65536))
        except socket.timeout:
            return got


def http_get(port, path):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=5) as r:
        return r.read().decode()


class RelayNeverAnswers(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="rtce-amp-")
        self.keys = os.path.join(self.tmp, "keys.yaml")
        self.other_keys = os.path.join(self.tmp, "other.yaml")
        for path, key_id in ((self.keys, 1), (self.other_keys, 2)):
            with open(path, "w") as f:
                subprocess.run([ARGS.relay, "hint", "keygen", "--id", str(key_id)], stdout=f, check=True, timeout=10)
        self.endpoint = udp_socket()  # the transceiver endpoint: receives, never answers
        self.addCleanup(self.endpoint.close)
        self.vip_port, self.return_port, self.admin = (free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_DGRAM),
                                                       free_port())
        self.log = open(os.path.join(self.tmp, "relay.log"), "w")
        self.relay = subprocess.Popen(
            [ARGS.relay, "--hint-key-file", self.keys, "--listen", "127.0.0.1:%d" % self.vip_port,
             "--return-listen", "[::]:%d" % self.return_port, "--admin-listen", "127.0.0.1:%d" % self.admin,
             "--workers", "1", "--pin-cpus", "false", "--cluster-id", "0",
             "--endpoints", "1=127.0.0.1:%d" % self.endpoint.getsockname()[1]],
            stdout=self.log, stderr=subprocess.STDOUT)
        self.addCleanup(self.stop)

        def ready():
            if self.relay.poll() is not None:
                raise AssertionError("relay exited with %d" % self.relay.returncode)
            try:
                return http_get(self.admin, "/readyz")
            except OSError:
                return None
        wait_for(ready, 15, "relay /readyz")

    def stop(self):
        if self.relay.poll() is None:
            self.relay.kill()
        self.relay.wait(timeout=10)
        self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def mint(self, endpoint=1, cluster=0, keys=None):
        r = subprocess.run([ARGS.relay, "hint", "encode", "--key-file", keys or self.keys, "--cluster",
                            str(cluster), "--endpoint", str(endpoint)], capture_output=True, text=True, check=True,
                           timeout=10)
        return r.stdout.strip()

    def metrics(self):
        return prom_metrics.parse(http_get(self.admin, "/metrics"))

    def test_nothing_comes_back_to_any_sender(self):
        valid = self.mint()
        tampered = valid[:-1] + ("A" if valid[-1] != "A" else "B")
        probes = {
            "valid hint": stun.binding_request(valid, "cl01", "x" * 22)[1],
            "tampered hint": stun.binding_request(tampered, "cl01", "x" * 22)[1],
            "foreign key": stun.binding_request(self.mint(keys=self.other_keys), "cl01", "x" * 22)[1],
            "other cluster": stun.binding_request(self.mint(cluster=9), "cl01", "x" * 22)[1],
            "unknown endpoint": stun.binding_request(self.mint(endpoint=77), "cl01", "x" * 22)[1],
            "random ufrag": stun.binding_request(os.urandom(8).hex(), "cl01", "x" * 22)[1],
            "no USERNAME": stun.encode(stun.BINDING_REQUEST, stun.new_txid(), []),
            "header only": struct.pack("!HHI", 1, 0, stun.MAGIC_COOKIE) + os.urandom(12),
            "Binding success": stun.encode(stun.BINDING_SUCCESS, stun.new_txid(), []),
            "Binding indication": stun.encode(stun.BINDING_INDICATION, stun.new_txid(), []),
            "bad STUN length": struct.pack("!HHI", 1, 400, stun.MAGIC_COOKIE) + os.urandom(12),
            "DTLS ClientHello-like": b"\x16\xfe\xfd" + os.urandom(60),
            "RTP-like": b"\x80\x6f" + os.urandom(170),
            "garbage": os.urandom(300),
            "one byte": b"\x00",
            "empty": b"",
            "1400 bytes": os.urandom(1400),
        }
        senders = {name: udp_socket() for name in probes}
        victim = udp_socket()  # the address forged frames name as their client
        for s in list(senders.values()) + [victim]:
            self.addCleanup(s.close)
        before = self.metrics()
        rounds = 20
        for _ in range(rounds):
            for name, data in probes.items():
                senders[name].sendto(data, ("127.0.0.1", self.vip_port))
        # Forged return-path frames from a client, naming the victim (and the valid flow's own
        # client) as the destination: only the endpoint may use the return port.
        vip = ("127.0.0.1", self.vip_port)
        valid_client = senders["valid hint"].getsockname()
        forgers = [udp_socket(), udp_socket()]
        for s in forgers:
            self.addCleanup(s.close)
        for _ in range(rounds):
            forgers[0].sendto(proxy_v2.encode(victim.getsockname(), vip) + b"\x80" + os.urandom(100),
                              ("127.0.0.1", self.return_port))
            forgers[1].sendto(proxy_v2.encode(valid_client, vip) + os.urandom(100), ("127.0.0.1", self.return_port))
        sent = rounds * (len(probes) + 2)

        # Control: the relay received every datagram (its counters moved by all of them), and
        # the valid hint's checks reached the endpoint.
        def counted():
            m = self.metrics()
            return prom_metrics.delta(before, m, "rtcedge_relay_received_packets_total",
                                      direction="client_to_transceiver") + prom_metrics.delta(
                before, m, "rtcedge_relay_received_packets_total", direction="transceiver_to_client") >= sent
        wait_for(counted, 10, "the relay to count all %d datagrams" % sent)
        forwarded = drain(self.endpoint, time.monotonic() + 0.5)
        self.assertEqual(len(forwarded), rounds, "the valid hint's checks should reach the endpoint")
        quiet_until = time.monotonic() + QUIET_S
        answers = {name: drain(s, quiet_until) for name, s in list(senders.items()) + [("victim", victim)] +
                   [("forger %d" % i, s) for i, s in enumerate(forgers)]}
        self.assertEqual({k: v for k, v in answers.items() if v}, {}, "the relay answered")
        after = self.metrics()
        dropped = {r: prom_metrics.delta(before, after, "rtcedge_relay_dropped_packets_total", reason=r)
                   for r in ("stun_malformed", "stun_not_binding_request", "stun_no_username", "hint_rejected",
                             "unknown_endpoint", "no_flow", "return_wrong_sender", "return_malformed",
                             "return_no_flow")}
        self.assertGreaterEqual(dropped["hint_rejected"], 4 * rounds, dropped)  # tampered, foreign, cluster, random
        self.assertGreaterEqual(dropped["unknown_endpoint"], rounds, dropped)
        self.assertGreaterEqual(dropped["return_wrong_sender"] + dropped["return_no_flow"], 2 * rounds, dropped)
        self.assertEqual(prom_metrics.delta(before, after, "rtcedge_relay_flows_created_total"), 1)
        self.assertEqual(sum(dropped.values()), sent - rounds, dropped)  # all but the valid hint's
        FIGURES.append(("relay: datagrams sent / answered", "%d / 0" % sent,
                        "%d kinds × %d rounds + forged return frames; drops %s" % (
                            len(probes), rounds, {k: int(v) for k, v in dropped.items() if v})))


class TransceiverRepliesAreSmaller(unittest.TestCase):
    def start(self, *extra):
        http_port, media_port = free_port(), free_port(socket.SOCK_DGRAM)
        log = tempfile.NamedTemporaryFile(prefix="rtce-amp-tx-", suffix=".log", delete=False)
        proc = subprocess.Popen([ARGS.transceiver, "--http-listen", "127.0.0.1:%d" % http_port, "--workers", "1",
                                 "--media-listen", "127.0.0.1", "--media-base-port", str(media_port), *extra],
                                stdout=log, stderr=subprocess.STDOUT)

        def stop():
            proc.kill()
            proc.wait(timeout=10)
            os.unlink(log.name)
        self.addCleanup(stop)

        def ready():
            if proc.poll() is not None:
                raise AssertionError("transceiver exited with %d" % proc.returncode)
            try:
                return http_get(http_port, "/healthz")
            except OSError:
                return None
        wait_for(ready, 15, "transceiver /healthz")
        with open(FIXTURE) as f:
            offer = f.read()
        req = urllib.request.Request("http://127.0.0.1:%d/v1/sessions" % http_port, data=offer.encode(),
                                     headers={"Content-Type": "application/sdp"}, method="POST")
        with urllib.request.urlopen(req, timeout=5) as r:
            answer = r.read().decode()
        self.server_ufrag = re.search(r"a=ice-ufrag:(\S+)", answer).group(1)
        self.server_pwd = re.search(r"a=ice-pwd:(\S+)", answer).group(1)
        self.client_ufrag = re.search(r"a=ice-ufrag:(\S+)", offer).group(1)
        self.http_port, self.media = http_port, ("127.0.0.1", media_port)

    def unauthenticated_requests(self):
        su, cu, pwd = self.server_ufrag, self.client_ufrag, self.server_pwd
        user = ("%s:%s" % (su, cu)).encode()
        ctl = (0x802A, os.urandom(8))
        prio = (stun.ATTR_PRIORITY, struct.pack("!I", 1))

        def req(attrs, key=None, fingerprint=True):
            return stun.encode(stun.BINDING_REQUEST, stun.new_txid(), attrs, integrity_key=key,
                               fingerprint=fingerprint)
        corrupt = bytearray(req([(stun.ATTR_USERNAME, user), ctl, prio], key=pwd.encode()))
        corrupt[-13] ^= 1  # inside the HMAC; FINGERPRINT is recomputed below
        body = bytes(corrupt[:-8])
        crc = zlib.crc32(body) ^ stun.FINGERPRINT_XOR
        corrupt = body + struct.pack("!HHI", stun.ATTR_FINGERPRINT, 4, crc)
        return {
            "wrong MESSAGE-INTEGRITY": corrupt,
            "wrong pwd": req([(stun.ATTR_USERNAME, user), ctl, prio], key=b"not-the-password-at-all"),
            "no MESSAGE-INTEGRITY": req([(stun.ATTR_USERNAME, user)]),
            "minimal: USERNAME = server ufrag:x, FINGERPRINT": req([(stun.ATTR_USERNAME, (su + ":x").encode())]),
            "USERNAME = server ufrag only": req([(stun.ATTR_USERNAME, su.encode())]),
            "USERNAME = server ufrag:, integrity": req([(stun.ATTR_USERNAME, (su + ":").encode())], key=b"k"),
            "wrong remote ufrag": req([(stun.ATTR_USERNAME, (su + ":zzzz").encode()), ctl], key=pwd.encode()),
            "unknown attribute, no integrity": req([(stun.ATTR_USERNAME, user), (0x0077, b"")]),
            "unknown attribute, wrong integrity": req([(stun.ATTR_USERNAME, user), (0x0077, b"")], key=b"k"),
            "no FINGERPRINT": req([(stun.ATTR_USERNAME, user)], key=b"k", fingerprint=False),
            "unknown ufrag": req([(stun.ATTR_USERNAME, b"AAAAAAAAAAAAAAAA:x")], key=b"k"),
            "header only": struct.pack("!HHI", 1, 0, stun.MAGIC_COOKIE) + os.urandom(12),
            "Binding indication": stun.encode(stun.BINDING_INDICATION, stun.new_txid(), [(stun.ATTR_USERNAME, user)]),
            "DTLS-looking": b"\x16\xfe\xfd" + os.urandom(40),
            "RTP-looking": b"\x80\x6f" + os.urandom(30),
        }

    def test_every_reply_is_no_larger_than_its_request(self):
        # Every error reply allowed, so that every kind of request shows its reply.
        self.start("--sessions-stun-error-replies-per-second", "1000")
        replies = {}
        worst = (0.0, "")
        for name, data in self.unauthenticated_requests().items():
            s = udp_socket()
            self.addCleanup(s.close)
            for _ in range(3):
                s.sendto(data, self.media)
            got = drain(s, time.monotonic() + 0.3)
            replies[name] = [len(d) for d, _ in got]
            for reply, _ in got:
                self.assertEqual(reply[:2], b"\x01\x11", "%s: answered with %r, not an error" % (name, reply[:2]))
                self.assertLessEqual(len(reply), len(data), "%s: a %d-byte request got a %d-byte reply" % (
                    name, len(data), len(reply)))
                worst = max(worst, (len(reply) / len(data), name))
            self.assertLessEqual(len(got), 3, name)
        answered = {k: v for k, v in replies.items() if v}
        self.assertIn("wrong MESSAGE-INTEGRITY", answered, "the control: an unauthenticated check gets a 401")
        m = prom_metrics.parse(http_get(self.http_port, "/metrics"))
        self.assertGreater(m.get("rtcedge_transceiver_datagrams_dropped_total", reason="unknown_ufrag"), 0)
        FIGURES.append(("transceiver: largest reply/request ratio", "%.2f (%s)" % worst,
                        "%d kinds, %d answered: %s" % (len(replies), len(answered), answered)))

    def test_error_replies_are_bounded_by_the_rate(self):
        self.start()  # the default sessions.stun_error_replies_per_second (5)
        requests = self.unauthenticated_requests()
        s = udp_socket()
        self.addCleanup(s.close)
        sent_bytes, sent, t0 = 0, 0, time.monotonic()
        got = []
        while time.monotonic() - t0 < 2.0:
            for data in requests.values():
                s.sendto(data, self.media)
                sent_bytes += len(data)
                sent += 1
            got += drain(s, time.monotonic() + 0.01)
        elapsed = time.monotonic() - t0
        got += drain(s, time.monotonic() + QUIET_S)
        reply_bytes = sum(len(d) for d, _ in got)
        # A burst of 5, then 5 a second (one session is addressed by every request).
        self.assertLessEqual(len(got), 5 + 5 * (elapsed + QUIET_S) + 1, "%d replies in %.1f s" % (len(got), elapsed))
        self.assertGreaterEqual(len(got), 1)
        self.assertLess(reply_bytes, sent_bytes / 100)
        FIGURES.append(("transceiver: error replies to a flood of bad checks", "%d replies, %d B for %d requests, %d B"
                        % (len(got), reply_bytes, sent, sent_bytes), "%.1f s, default 5 replies/s per session"
                        % elapsed))


def print_figures():
    if FIGURES:
        print("\namplification figures (loopback, %d CPUs)" % os.cpu_count())
        for what, value, cond in FIGURES:
            print("| %s | %s | %s |" % (what, value, cond))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--relay", required=True)
    ap.add_argument("--transceiver", required=True)
    ARGS, rest = ap.parse_known_args()
    prog = unittest.main(argv=[sys.argv[0], "-v", *rest], exit=False)
    print_figures()
    sys.exit(0 if prog.result.wasSuccessful() else 1)
