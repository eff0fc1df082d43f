#!/usr/bin/python3
"""test_signaling_abuse.py — the signaling API of a real rtcedge-transceiver under hostile
clients (issue 16 §3), on loopback, with the bounds it claims measured and asserted:

  - slow clients (one byte a second, in the header or in the body) are closed by the
    request deadline (the 30 s HTTP idle timeout covers a whole request), while /healthz
    keeps answering;
  - thousands of idle keep-alive connections against a low http.max_connections: the open
    count stays at the cap, the idlest are closed (evicted_at_cap), the newest still work,
    and the process's peak RSS grows by less than a stated bound; twice the cap of half-sent
    requests does not keep a real client from its session;
  - header, target and body limits at their exact edges (431, 414, 413);
  - a generated hostile SDP corpus: every offer is answered 201 or 400 naming a reason, the
    process stays up, and bad_sdp counts each 400;
  - session-creation floods: an unauthenticated one costs nothing (401s, no setup token is
    taken) and a real client with a key gets its session at once; an authenticated one gets
    only 201/429/503 with Retry-After, admits no more than the token bucket allows and never
    more live sessions than sessions.max_per_worker.

Figures are printed as a table at the end. Standard library only. Exit 0 pass, 1 fail.
"""

import http.client
import os
import random
import re
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support", "py"))
import prom_metrics  # noqa: E402
from rtcetest.core import cpu_model, free_port, raw_exchange, test_flags, wait_for  # noqa: E402
from rtcetest.transceiver import TransceiverProcess  # noqa: E402

FIXTURE = os.path.join(HERE, "..", "sdp", "fixtures", "chrome_audio_offer.sdp")
API_KEY = "abuse-test-key-0123456789"
ARGS = None
FIGURES = []  # (what, value, conditions), printed after the run

# The signaling server's fixed limits (common/http_server.h Limits; http.max_body_bytes default).
IDLE_TIMEOUT_S = 30
MAX_HEADER_BYTES = 16 * 1024
MAX_TARGET_BYTES = 8 * 1024
MAX_BODY_BYTES = 64 * 1024


def chrome_offer():
    with open(FIXTURE, "rb") as f:
        return f.read().decode()


def proc_status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError("no %s in /proc/%d/status" % (field, pid))


def raise_own_open_files_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


class Transceiver(TransceiverProcess):
    def __init__(self, *extra, log_level="warn"):
        super().__init__(ARGS.transceiver, ["--media-listen", "127.0.0.1", "--media-base-port",
                                            str(free_port(socket.SOCK_DGRAM)), "--http-api-keys", API_KEY,
                                            "--log-level", log_level, *extra], log_prefix="rtce-abuse-")

    def offer(self, sdp, key=API_KEY, timeout=10):
        return self.post("/v1/sessions", sdp, key, "application/sdp", timeout=timeout)

    def metrics(self):
        return prom_metrics.parse(self.metrics_text())

    def rss_kib(self):
        return proc_status_kib(self.proc.pid, "VmRSS")

    def peak_rss_kib(self):
        return proc_status_kib(self.proc.pid, "VmHWM")


def hostile_offers(seed=16):
    """A deterministic corpus of hostile offers: structural edits of a real Chrome offer
    (each names what it breaks) and random byte-level mutations of it."""
    base = chrome_offer()
    lines = base.split("\r\n")
    cases = {
        "empty": "",
        "only v=0": "v=0\r\n",
        "NUL bytes": base.replace("a=rtcp-mux", "a=rtcp\x00mux"),
        "LF only": base.replace("\r\n", "\n"),
        "CR only": base.replace("\r\n", "\r"),
        "no v= line": "\r\n".join(lines[1:]),
        "v=1": base.replace("v=0", "v=1", 1),
        "line of 60000 bytes": base.replace("s=-", "s=" + "x" * 60000, 1),
        "20000 attribute lines": base.replace("a=rtcp-mux\r\n", "a=x\r\n" * 10000 + "a=rtcp-mux\r\n"),
        "300 m= sections": base + "".join("m=audio 9 UDP/TLS/RTP/SAVPF 111\r\nc=IN IP4 0.0.0.0\r\n"
                                          for _ in range(300)),
        "port 99999": re.sub(r"m=audio \d+", "m=audio 99999", base),
        "port -1": re.sub(r"m=audio \d+", "m=audio -1", base),
        "payload type 1000": re.sub(r"a=rtpmap:(\d+) opus", "a=rtpmap:1000 opus", base),
        "payload type overflow": re.sub(r"a=rtpmap:(\d+) opus", "a=rtpmap:99999999999999999999 opus", base),
        "fingerprint not hex": re.sub(r"(a=fingerprint:sha-256 )\S+", r"\1ZZ:" + "00:" * 30 + "00", base),
        "fingerprint short": re.sub(r"(a=fingerprint:sha-256 )\S+", r"\1AB:CD", base),
        "fingerprint 10000 bytes": re.sub(r"(a=fingerprint:sha-256 )\S+", r"\1" + "AB:" * 3000 + "AB", base),
        "ice-ufrag empty": re.sub(r"a=ice-ufrag:\S+", "a=ice-ufrag:", base),
        "ice-ufrag 5000 bytes": re.sub(r"a=ice-ufrag:\S+", "a=ice-ufrag:" + "u" * 5000, base),
        "ice-pwd with spaces": re.sub(r"a=ice-pwd:\S+", "a=ice-pwd:a b c d e f g h i j k l", base),
        "ice-pwd missing": re.sub(r"a=ice-pwd:[^\r]*\r\n", "", base),
        "setup:holdconn": re.sub(r"a=setup:\S+", "a=setup:holdconn", base),
        "two fingerprints differing": base.replace("a=rtcp-mux\r\n", "a=rtcp-mux\r\na=fingerprint:sha-256 " +
                                                   ":".join(["00"] * 32) + "\r\n"),
        "rtpmap without rate": re.sub(r"a=rtpmap:(\d+) opus/48000/2", r"a=rtpmap:\1 opus", base),
        "opus at 8000": re.sub(r"opus/48000/2", "opus/8000/2", base),
        "fmtp garbage": re.sub(r"(a=fmtp:\d+ )[^\r]*", r"\1;;;===;;;", base),
        "extmap id 0": re.sub(r"a=extmap:\d+", "a=extmap:0", base),
        "extmap id 65536": re.sub(r"a=extmap:\d+", "a=extmap:65536", base),
        "candidate garbage": base.replace("a=rtcp-mux\r\n", "a=candidate:x y z\r\na=rtcp-mux\r\n"),
        "bundle naming nothing": re.sub(r"a=group:BUNDLE [^\r]*", "a=group:BUNDLE nope", base),
        "mid 3000 bytes": re.sub(r"a=mid:\S+", "a=mid:" + "m" * 3000, base),
        "non-UTF-8 bytes": base.replace("s=-", "s=\udcff\udcfe", 1),
        "c= IN IP9": re.sub(r"c=IN IP4 \S+", "c=IN IP9 x", base),
        "b=AS overflow": base.replace("a=rtcp-mux\r\n", "b=AS:999999999999999999999\r\na=rtcp-mux\r\n"),
        "application sctp-port 0": base + "m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\n"
                                          "a=sctp-port:0\r\na=max-message-size:-5\r\n",
    }
    rng = random.Random(seed)
    raw = base.encode()
    for i in range(150):
        b = bytearray(raw)
        for _ in range(rng.randint(1, 12)):
            op = rng.randrange(4)
            pos = rng.randrange(len(b))
            if op == 0:
                b[pos] = rng.randrange(256)
            elif op == 1:
                del b[pos:pos + rng.randint(1, 64)]
            elif op == 2:
                b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
            else:
                b[pos:pos] = b[rng.randrange(len(b)):][:rng.randint(1, 400)]
        cases["mutation %d" % i] = b.decode("latin-1")
    for i in range(0, len(raw), max(1, len(raw) // 40)):
        cases["truncated at %d" % i] = raw[:i].decode("latin-1")
    return cases


class SlowClients(unittest.TestCase):
    """One byte a second, never finishing: a header that never ends, and a body that
    trickles after a complete header. The HTTP server arms one deadline per request, so
    both are closed IDLE_TIMEOUT_S after they connected, not after their last byte."""

    CLIENTS = 16

    def test_slow_clients_are_closed_by_the_request_deadline(self):
        tx = Transceiver()
        self.addCleanup(tx.stop)
        socks = []
        for i in range(self.CLIENTS):
            s = socket.create_connection(("127.0.0.1", tx.http_port), timeout=5)
            s.setblocking(False)
            socks.append(s)
        self.addCleanup(lambda: [s.close() for s in socks])
        header = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"s" * 100000
        body_first = (b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/sdp\r\n"
                      b"Authorization: Bearer " + API_KEY.encode() + b"\r\nContent-Length: 60000\r\n\r\n")
        started = time.monotonic()
        for i, s in enumerate(socks[self.CLIENTS // 2:]):
            s.sendall(body_first)  # complete header; then the body trickles
        sent = [0] * len(socks)
        closed_at = [None] * len(socks)
        healthz_worst = 0.0
        deadline = started + IDLE_TIMEOUT_S + 10
        while time.monotonic() < deadline and None in closed_at:
            for i, s in enumerate(socks):
                if closed_at[i] is not None:
                    continue
                try:
                    data = s.recv(4096)
                    if data == b"":
                        closed_at[i] = time.monotonic() - started
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    closed_at[i] = time.monotonic() - started
                    continue
                try:
                    s.send(header[sent[i]:sent[i] + 1] if i < self.CLIENTS // 2 else b"v")
                    sent[i] += 1
                except BlockingIOError:
                    pass
                except OSError:
                    closed_at[i] = time.monotonic() - started
            t0 = time.monotonic()
            self.assertEqual(tx.request("GET", "/healthz", timeout=5)[0], 200, "/healthz during slow clients")
            healthz_worst = max(healthz_worst, time.monotonic() - t0)
            time.sleep(1.0)  # one byte a second: the slow client's pace
        self.assertNotIn(None, closed_at, "slow clients still open after %ds" % (IDLE_TIMEOUT_S + 10))
        # Not before the deadline (they were sending all along: no per-read timeout closed
        # them) and not much after it.
        self.assertGreaterEqual(min(closed_at), IDLE_TIMEOUT_S - 1.5, closed_at)
        self.assertLessEqual(max(closed_at), IDLE_TIMEOUT_S + 3, closed_at)
        self.assertTrue(tx.alive())
        FIGURES.append(("slow client (1 byte/s) closed after", "%.1f–%.1f s" % (min(closed_at), max(closed_at)),
                        "%d clients, header or body trickle; idle timeout %d s" % (self.CLIENTS, IDLE_TIMEOUT_S)))
        FIGURES.append(("/healthz worst latency during slow clients", "%.0f ms" % (healthz_worst * 1000), ""))


class IdleConnections(unittest.TestCase):
    CAP = 256
    OPENED = 3000
    RSS_GROWTH_BOUND_KIB = 32 * 1024  # the cap's connections need ~20 KiB each; 32 MiB is generous

    def test_idle_keepalive_connections_stay_at_the_cap(self):
        if raise_own_open_files_limit() < self.OPENED + 100:
            self.skipTest("this test process cannot open %d sockets" % self.OPENED)
        tx = Transceiver("--http-max-connections", str(self.CAP))
        self.addCleanup(tx.stop)
        tx.request("GET", "/metrics")
        rss_before = tx.rss_kib()
        conns = []
        self.addCleanup(lambda: [c.close() for c in conns])
        request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
        t0 = time.monotonic()
        for i in range(self.OPENED):
            c = socket.create_connection(("127.0.0.1", tx.http_port), timeout=5)
            if i % 2 == 0:  # half have been used once (keep-alive), half never sent a byte
                c.sendall(request)
                self.assertIn(b"200", c.recv(4096))
            conns.append(c)
        opening = time.monotonic() - t0
        self.assertTrue(wait_for(lambda: tx.request("GET", "/healthz", timeout=5)[0] == 200, 5, "/healthz"))
        m = tx.metrics()
        open_now = m.get("rtcedge_http_connections_open", server="signaling")
        evicted = m.get("rtcedge_http_connections_evicted_total", server="signaling", reason="at_cap")
        self.assertLessEqual(open_now, self.CAP)
        # Every connection beyond the cap (plus this probe's and the scrape's) closed an idle one.
        self.assertGreaterEqual(evicted, self.OPENED - self.CAP)
        # The idlest went first: the oldest is closed, the newest still serves a request.
        conns[0].settimeout(2)
        self.assertEqual(conns[0].recv(1), b"")
        conns[-1].settimeout(5)
        conns[-1].sendall(request)
        self.assertIn(b"HTTP/1.1 200", conns[-1].recv(4096))
        rss_after, peak = tx.rss_kib(), tx.peak_rss_kib()
        self.assertLess(peak - rss_before, self.RSS_GROWTH_BOUND_KIB,
                        "peak RSS grew by %d KiB for %d connections at a cap of %d" %
                        (peak - rss_before, self.OPENED, self.CAP))
        FIGURES.append(("idle connections opened / open at the end / evicted_at_cap",
                        "%d / %d / %d" % (self.OPENED, open_now, evicted),
                        "http.max_connections %d, opened in %.1f s" % (self.CAP, opening)))
        FIGURES.append(("transceiver RSS before / after / peak", "%d / %d / %d KiB" % (rss_before, rss_after, peak),
                        "bound asserted: peak − before < %d KiB" % self.RSS_GROWTH_BOUND_KIB))


    def test_half_sent_requests_above_the_cap_do_not_keep_a_real_client_out(self):
        # Slow clients mid-request are not busy (no request is being handled), so at the cap
        # they are closed for newcomers like any idle connection.
        if raise_own_open_files_limit() < 2 * self.CAP + 100:
            self.skipTest("this test process cannot open %d sockets" % (2 * self.CAP))
        tx = Transceiver("--http-max-connections", str(self.CAP))
        self.addCleanup(tx.stop)
        conns = []
        self.addCleanup(lambda: [c.close() for c in conns])
        for i in range(2 * self.CAP):
            c = socket.create_connection(("127.0.0.1", tx.http_port), timeout=5)
            c.sendall(b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\nv=0" if i % 2
                      else b"GET /healthz HTTP/1.1\r\nX-Slow: ")
            conns.append(c)
        t0 = time.monotonic()
        status, _, body = tx.offer(chrome_offer(), timeout=5)
        self.assertEqual(status, 201, body[:200])
        self.assertLess(time.monotonic() - t0, 2.0)
        m = tx.metrics()
        self.assertLessEqual(m.get("rtcedge_http_connections_open", server="signaling"), self.CAP)
        self.assertGreaterEqual(m.get("rtcedge_http_connections_evicted_total", server="signaling", reason="at_cap"),
                                self.CAP)


class OversizedRequests(unittest.TestCase):
    def test_limits_at_their_edges(self):
        tx = Transceiver()
        self.addCleanup(tx.stop)
        port = tx.http_port
        # Target: exactly at the limit is routed (404), one byte more is 414.
        at = b"/" + b"t" * (MAX_TARGET_BYTES - 1)
        self.assertEqual(raw_exchange(port, b"GET " + at + b" HTTP/1.1\r\nHost: x\r\n\r\n")[0], 404)
        self.assertEqual(raw_exchange(port, b"GET " + at + b"t HTTP/1.1\r\nHost: x\r\n\r\n")[0], 414)
        self.assertEqual(raw_exchange(port, b"GET /" + b"t" * 200000 + b" HTTP/1.1\r\n\r\n")[0], 414)
        # Header: one field that overflows, many that do; a header that never ends (no CRLF).
        big = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * MAX_HEADER_BYTES + b"\r\n\r\n"
        self.assertEqual(raw_exchange(port, big)[0], 431)
        many = b"".join(b"X-%d: v\r\n" % i for i in range(4000))
        self.assertEqual(raw_exchange(port, b"GET /healthz HTTP/1.1\r\n" + many + b"\r\n")[0], 431)
        self.assertEqual(raw_exchange(port, b"GET /healthz HTTP/1.1\r\nX: " + b"y" * 100000)[0], 431)
        # Body: the limit itself is accepted (parsed, so 400 for a non-offer), one byte more is
        # 413, and a Content-Length far beyond it is refused before any of it is read.
        head = (b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/sdp\r\n"
                b"Authorization: Bearer " + API_KEY.encode() + b"\r\nContent-Length: %d\r\n\r\n")
        self.assertEqual(raw_exchange(port, head % MAX_BODY_BYTES + b"v" * MAX_BODY_BYTES)[0], 400)
        self.assertEqual(raw_exchange(port, head % (MAX_BODY_BYTES + 1) + b"v" * (MAX_BODY_BYTES + 1))[0], 413)
        t0 = time.monotonic()
        self.assertEqual(raw_exchange(port, head % (1 << 40))[0], 413)
        self.assertLess(time.monotonic() - t0, 2, "a huge Content-Length was not refused at once")
        chunked = (b"POST /v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Type: application/sdp\r\n"
                   b"Transfer-Encoding: chunked\r\n\r\n" + b"4000\r\n" + b"c" * 0x4000 + b"\r\n") * 1
        chunks = chunked + (b"4000\r\n" + b"c" * 0x4000 + b"\r\n") * 4 + b"0\r\n\r\n"
        self.assertEqual(raw_exchange(port, chunks)[0], 413, "a chunked body past the limit")
        # Malformed framing: 400, never a crash.
        for junk in (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(100),  # a TLS ClientHello
                     b"GET / HTTP/9.9\r\n\r\n", b"\r\n\r\n\r\n", b"POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
                     b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
                     b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"):
            status, text = raw_exchange(port, junk)
            self.assertIn(status, (400, None), "%r -> %s" % (junk[:40], text[:120]))
        self.assertTrue(tx.alive())
        self.assertEqual(tx.request("GET", "/healthz")[0], 200)
        FIGURES.append(("limits (target / header / body)", "%d / %d / %d bytes" %
                        (MAX_TARGET_BYTES, MAX_HEADER_BYTES, MAX_BODY_BYTES), "414 / 431 / 413 one byte past"))


class HostileSdp(unittest.TestCase):
    def test_hostile_offers_get_201_or_400_naming_the_reason(self):
        tx = Transceiver("--sessions-setup-rate", "100000", "--sessions-setup-burst", "100000",
                         "--sessions-connect-timeout", "1s")
        self.addCleanup(tx.stop)
        rss_before = tx.rss_kib()
        cases = hostile_offers()
        codes = {}
        for name, sdp in cases.items():
            status, _, text = tx.offer(sdp.encode("latin-1", "surrogateescape"))
            codes[status] = codes.get(status, 0) + 1
            self.assertIn(status, (201, 400, 413), "%s: %d %s" % (name, status, text[:200]))
            if status == 400:
                self.assertRegex(text, r"^bad SDP offer: \S", "%s: the 400 names no reason: %r" % (name, text[:200]))
            self.assertTrue(tx.alive(), "the transceiver died on %s" % name)
        m = tx.metrics()
        self.assertEqual(m.get("rtcedge_transceiver_sessions_rejected_total", reason="bad_sdp"), codes.get(400, 0))
        self.assertEqual(tx.offer(chrome_offer())[0], 201, "a valid offer after the corpus")
        FIGURES.append(("hostile SDP corpus", "%d offers: %s" % (len(cases), ", ".join(
            "%d×%s" % (n, s) for s, n in sorted(codes.items()))), "RSS %d → %d KiB" % (rss_before, tx.rss_kib())))


class Flood(threading.Thread):
    """POSTs offers over one keep-alive connection until stopped; tallies statuses and
    checks Retry-After on every 429/503."""

    def __init__(self, port, key, stop):
        super().__init__(daemon=True)
        self.port, self.key, self.stop_event = port, key, stop
        self.codes, self.bad_retry_after = {}, []
        self.offer = chrome_offer()

    def run(self):
        conn = None
        while not self.stop_event.is_set():
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                headers = {"Content-Type": "application/sdp"}
                if self.key:
                    headers["Authorization"] = "Bearer " + self.key
                conn.request("POST", "/v1/sessions", self.offer, headers)
                r = conn.getresponse()
                r.read()
                self.codes[r.status] = self.codes.get(r.status, 0) + 1
                expected = {429: "1", 503: "2"}.get(r.status)
                if expected and r.getheader("Retry-After") != expected:
                    self.bad_retry_after.append((r.status, r.getheader("Retry-After")))
                if r.getheader("Connection", "").lower() == "close":
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException):
                self.codes["error"] = self.codes.get("error", 0) + 1
                if conn:
                    conn.close()
                conn = None
        if conn:
            conn.close()


class SessionFloods(unittest.TestCase):
    RATE, BURST, MAX_SESSIONS = 10, 10, 25
    FLOOD_S = 5.0

    def flood(self, tx, keys):
        stop = threading.Event()
        floods = [Flood(tx.http_port, k, stop) for k in keys]
        for f in floods:
            f.start()
        return stop, floods

    def end(self, stop, floods):
        stop.set()
        for f in floods:
            f.join(timeout=10)
        codes = {}
        for f in floods:
            for k, v in f.codes.items():
                codes[k] = codes.get(k, 0) + v
            self.assertEqual(f.bad_retry_after, [], "429/503 without the documented Retry-After")
        return codes

    def test_unauthenticated_flood_does_not_keep_a_real_client_out(self):
        tx = Transceiver("--sessions-setup-rate", str(self.RATE), "--sessions-setup-burst", str(self.BURST))
        self.addCleanup(tx.stop)
        rss_before = tx.rss_kib()
        stop, floods = self.flood(tx, [None, "wrong-key-0123456789abc", None, "x" * 4000])
        self.addCleanup(stop.set)
        time.sleep(0.5)  # let the flood reach its pace before the real client asks
        latencies = []
        t_end = time.monotonic() + self.FLOOD_S
        while time.monotonic() < t_end:
            t0 = time.monotonic()
            status, headers, body = tx.offer(chrome_offer(), timeout=5)
            latencies.append(time.monotonic() - t0)
            self.assertEqual(status, 201, "the real client during the flood: %d %s" % (status, body[:200]))
            time.sleep(0.4)  # the real client's own pace: a few calls during the flood
        codes = self.end(stop, floods)
        self.assertEqual(set(codes) - {401}, set(), codes)
        m = tx.metrics()
        self.assertEqual(m.get("rtcedge_transceiver_sessions_rejected_total", reason="rate_limited"), 0)
        self.assertGreaterEqual(m.get("rtcedge_transceiver_sessions_rejected_total", reason="unauthorized"),
                                codes[401])
        self.assertLessEqual(max(latencies), 2.0, "the real client waited %.2f s for its answer" % max(latencies))
        flood_rate = codes[401] / (self.FLOOD_S + 0.5)
        FIGURES.append(("unauthenticated flood: 401s / real client's setups (all 201), worst latency",
                        "%d (%.0f/s) / %d, %.0f ms" % (codes[401], flood_rate, len(latencies), max(latencies) * 1e3),
                        "4 keep-alive flooders; RSS %d → %d KiB" % (rss_before, tx.rss_kib())))

    def test_authenticated_flood_is_refused_as_documented(self):
        tx = Transceiver("--sessions-setup-rate", str(self.RATE), "--sessions-setup-burst", str(self.BURST),
                         "--sessions-max-per-worker", str(self.MAX_SESSIONS), "--sessions-connect-timeout", "30s")
        self.addCleanup(tx.stop)
        rss_before = tx.rss_kib()
        t0 = time.monotonic()
        stop, floods = self.flood(tx, [API_KEY] * 4)
        self.addCleanup(stop.set)
        worst_active = 0
        while time.monotonic() - t0 < self.FLOOD_S:
            active = tx.metrics().get("rtcedge_transceiver_sessions_active_total")
            worst_active = max(worst_active, active)
            self.assertLessEqual(active, self.MAX_SESSIONS)
            time.sleep(0.2)  # sampling interval
        codes = self.end(stop, floods)
        elapsed = time.monotonic() - t0
        self.assertEqual(set(codes) - {201, 429, 503}, set(), codes)
        # The token bucket admits at most burst + rate × time; capacity caps what is live.
        self.assertLessEqual(codes.get(201, 0), self.BURST + self.RATE * elapsed + 1)
        self.assertEqual(codes.get(201, 0), self.MAX_SESSIONS, "the flood should fill the worker exactly")
        self.assertGreater(codes.get(429, 0), 0)
        self.assertGreater(codes.get(503, 0), 0)
        m = tx.metrics()
        self.assertEqual(m.get("rtcedge_transceiver_sessions_active_total"), self.MAX_SESSIONS)
        self.assertTrue(tx.alive())
        FIGURES.append(("authenticated flood: 201 / 429 / 503", "%d / %d / %d" % (
            codes.get(201, 0), codes.get(429, 0), codes.get(503, 0)),
            "%.1f s, setup_rate %d, burst %d, max_per_worker %d; RSS %d → %d KiB" % (
                elapsed, self.RATE, self.BURST, self.MAX_SESSIONS, rss_before, tx.rss_kib())))


class SecretFiles(unittest.TestCase):
    """Secret files are regular files of bounded size, checked for their mode at start, and
    no secret reaches the log."""

    def check_config(self, *argv):
        return subprocess.run([ARGS.transceiver, "--check-config", *argv], capture_output=True, text=True,
                              timeout=10)

    def test_realtime_key_file_that_never_ends_is_refused(self):
        # Regression: it was read line by line with std::getline, so /dev/zero hung start-up
        # while one "line" grew without bound.
        with tempfile.TemporaryDirectory() as d:
            fifo = os.path.join(d, "fifo")
            os.mkfifo(fifo)
            for path in ("/dev/zero", fifo):
                r = self.check_config("--realtime-key-file", path)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("realtime.key_file", r.stderr)
                self.assertIn("regular file", r.stderr)
            r = self.check_config("--backend-url", "wss://127.0.0.1:1/x", "--backend-ca-file", fifo)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("backend CA file", r.stderr)
            big = os.path.join(d, "big")
            with open(big, "w") as f:
                f.write("# x\n" * 300000)
            r = self.check_config("--realtime-key-file", big)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("too large", r.stderr)

    def test_world_readable_secret_files_are_warned_about(self):
        with tempfile.TemporaryDirectory() as d:
            keys = os.path.join(d, "ek.txt")
            with open(keys, "w") as f:
                f.write("# ephemeral-key secrets\nk1:%s\n" % ("s" * 40))
            os.chmod(keys, 0o644)
            r = self.check_config("--realtime-key-file", keys)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("realtime key file '%s' is readable by every user" % keys, r.stderr)
            os.chmod(keys, 0o600)
            r = self.check_config("--realtime-key-file", keys)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("warning", r.stderr)
            self.assertNotIn("s" * 40, r.stdout + r.stderr)

    def test_no_secret_in_the_log(self):
        secret_header = "sk-backend-secret-0123456789"
        ek_secret = "e" * 40
        tx = Transceiver("--realtime-key-secrets", "k1:" + ek_secret, "--backend-headers",
                         "Authorization: Bearer " + secret_header, log_level="debug")
        self.addCleanup(tx.stop)
        status, _, answer = tx.offer(chrome_offer())
        self.assertEqual(status, 201, answer)
        pwd = re.search(r"a=ice-pwd:(\S+)", answer).group(1)
        self.assertEqual(tx.offer(chrome_offer(), key="wrong-key-0123456789abcdef")[0], 401)
        status, _, body = tx.request("POST", "/v1/realtime/client_secrets", "{}",
                                     {"Authorization": "Bearer " + API_KEY, "Content-Type": "application/json"})
        self.assertEqual(status, 200, body)
        client_key = re.search(r'"value"\s*:\s*"([^"]+)"', body).group(1)
        wait_for(lambda: "session" in tx.output(), 5, "the session's log line")
        log = tx.output()
        # /metrics carries counts and reasons: no session id, ufrag or key.
        metrics_text = tx.request("GET", "/metrics")[2]
        session_id = re.search(r"session ([0-9a-f]{32})", log).group(1)
        ufrag = re.search(r"a=ice-ufrag:(\S+)", answer).group(1)
        for value in (session_id, ufrag, API_KEY, client_key):
            self.assertNotIn(value, metrics_text)
        offer_pwd = re.search(r"a=ice-pwd:(\S+)", chrome_offer()).group(1)
        for secret in (API_KEY, "wrong-key-0123456789abcdef", secret_header, ek_secret, pwd, offer_pwd, client_key):
            self.assertNotIn(secret, log)


def print_figures():
    if not FIGURES:
        return
    print("\nsignaling abuse figures (%s, %d CPUs, loopback)" % (cpu_model(), os.cpu_count()))
    w = max(len(f[0]) for f in FIGURES)
    for what, value, cond in FIGURES:
        print("| %-*s | %s | %s |" % (w, what, value, cond))


if __name__ == "__main__":
    ARGS, argv = test_flags("--transceiver")
    prog = unittest.main(argv=argv, exit=False)
    print_figures()
    sys.exit(0 if prog.result.wasSuccessful() else 1)
