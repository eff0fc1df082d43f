#!/usr/bin/python3
"""Signaling and lifecycle tests of rtcedge-transceiver, black box over HTTP and UDP on
loopback (Python standard library only): the WHIP-style API (201 + Location + answer,
GET state, DELETE), API keys, content type, hostile SDP naming the line, body limit,
CORS, admission (429 rate, 503 capacity, 503 draining, Retry-After), sessions that never
connect ending by themselves, datagram drops counted by reason, the SIGTERM drain, and
configuration errors. Every wait has a deadline."""

import json
import os
import re
import resource
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "sdp", "fixtures")
REPO_ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
ARGS = None
API_KEY = "test-key-0123456789abcdef"

sys.path.insert(0, os.path.join(HERE, "..", "..", "support", "py"))
from rtcetest.core import free_port, raw_exchange as raw_request, unittest_main, wait_for  # noqa: E402
from rtcetest.transceiver import TransceiverProcess, answer_lines  # noqa: E402
from prom_metrics import metric  # noqa: E402


def chrome_offer():
    with open(os.path.join(FIXTURES, "chrome_audio_offer.sdp"), "rb") as f:
        return f.read().decode()


def limit_open_files(n, hard=None):
    """A preexec_fn that sets RLIMIT_NOFILE to n (soft) and hard (default n) in the child
    (None: unchanged)."""
    if n is None:
        return None
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard or n))


def open_files_limits(pid):
    """(soft, hard) RLIMIT_NOFILE of a running process, from /proc/<pid>/limits."""
    with open(f"/proc/{pid}/limits") as f:
        for line in f:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError("no 'Max open files' line")


def thread_states(pid):
    """{thread id: state letter} from /proc/<pid>/task/*/stat."""
    states = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                states[tid] = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            pass  # the thread ended meanwhile
    return states


def healthz_ok(port, timeout=2):
    try:
        return raw_request(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", timeout=timeout)[0] == 200
    except OSError:
        return False


def open_idle_connections(port, n):
    conns = []
    for _ in range(n):
        c = socket.create_connection(("127.0.0.1", port), timeout=5)
        conns.append(c)
    return conns


def padded_offer(total_bytes):
    """The Chrome offer with session-level attribute lines inserted until it is total_bytes long."""
    offer = chrome_offer()
    head, sep, rest = offer.partition("m=audio")
    pad = []
    size = len(offer)
    while size < total_bytes:
        line = "a=x-padding:" + "p" * 1000 + "\r\n"
        pad.append(line)
        size += len(line)
    return head + "".join(pad) + sep + rest


class Transceiver(TransceiverProcess):
    def __init__(self, *extra, workers=1, open_files=None, open_files_hard=None):
        self.media_port = free_port(socket.SOCK_DGRAM)
        super().__init__(ARGS.transceiver, ["--media-base-port", str(self.media_port), *extra], workers=workers,
                         preexec_fn=limit_open_files(open_files, open_files_hard))

    def offer(self, sdp, key=API_KEY, content_type="application/sdp", extra=None):
        return self.post("/v1/sessions", sdp, key, content_type, extra)

    def metrics(self):
        return self.metrics_text()


class Signaling(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.keys = tempfile.NamedTemporaryFile("w", prefix="rtce-keys-", suffix=".yaml", delete=False)
        subprocess.run([ARGS.relay, "hint", "keygen", "--id", "3"], stdout=cls.keys, check=True, timeout=10)
        cls.keys.close()
        cls.tx = Transceiver("--http-api-keys", API_KEY, "--sessions-connect-timeout", "1s",
                             "--hint-key-file", cls.keys.name, "--hint-endpoint-base-id", "7", workers=2)

    @classmethod
    def tearDownClass(cls):
        cls.tx.stop()
        os.unlink(cls.keys.name)

    def offer_left_to_time_out(self):
        """(location, auth headers, final state) of a session offered and never connected,
        once the connect timeout has ended it."""
        status, headers, _ = self.tx.offer(chrome_offer())
        self.assertEqual(status, 201)
        auth = {"Authorization": f"Bearer {API_KEY}"}

        def ended():
            s = json.loads(self.tx.request("GET", headers["location"], headers=auth)[2])
            return s if s["state"] == "ended" else None
        return headers["location"], auth, wait_for(ended, 5, "the connect timeout to end the session")

    def test_answer_is_ice_lite_with_hint_ufrag_and_location(self):
        status, headers, answer = self.tx.offer(chrome_offer())
        lines = answer_lines(self, status, headers, answer, r"^/v1/sessions/[0-9a-f]{32}$")
        self.assertIn("a=ice-lite", lines)
        self.assertIn("a=rtcp-mux", lines)
        self.assertIn("a=setup:active", lines)
        self.assertTrue(any(l.startswith("a=group:BUNDLE ") for l in lines))
        self.assertTrue(any(re.match(r"a=fingerprint:sha-256 ([0-9A-F]{2}:){31}[0-9A-F]{2}$", l) for l in lines))
        ufrag = next(l.split(":", 1)[1] for l in lines if l.startswith("a=ice-ufrag:"))
        pwd = next(l.split(":", 1)[1] for l in lines if l.startswith("a=ice-pwd:"))
        self.assertGreaterEqual(len(pwd), 22)
        self.assertEqual(len(ufrag), 16)
        # The ufrag is a routing hint, signed with the shared key, naming one of the two
        # worker endpoints (ids 7 and 8).
        decoded = subprocess.run([ARGS.relay, "hint", "decode", "--key-file", self.keys.name, ufrag],
                                 capture_output=True, text=True, timeout=10)
        self.assertEqual(decoded.returncode, 0, decoded.stdout + decoded.stderr)
        hint = json.loads(decoded.stdout)
        self.assertEqual(hint["key_id"], 3)
        self.assertIn(hint["endpoint_id"], (7, 8))
        cands = [l for l in lines if l.startswith("a=candidate:")]
        self.assertEqual(len(cands), 1, answer)
        self.assertRegex(cands[0], r"udp \d+ 127\.0\.0\.1 \d+ typ host$")
        offer_pt = re.search(r"m=audio \d+ UDP/TLS/RTP/SAVPF (\d+)", chrome_offer())
        opus_pt = re.search(r"a=rtpmap:(\d+) opus/48000/2", chrome_offer()).group(1)
        self.assertTrue(offer_pt)
        self.assertIn(f"a=rtpmap:{opus_pt} opus/48000/2", lines)
        self.assertTrue(any(l.startswith(f"a=fmtp:{opus_pt} ") and "useinbandfec=1" in l for l in lines))

    def test_get_and_delete(self):
        status, headers, _ = self.tx.offer(chrome_offer())
        self.assertEqual(status, 201)
        location = headers["location"]
        auth = {"Authorization": f"Bearer {API_KEY}"}
        status, _, body = self.tx.request("GET", location, headers=auth)
        self.assertEqual(status, 200, body)
        state = json.loads(body)
        self.assertEqual(state["state"], "new")
        self.assertEqual(state["path"], "direct")
        self.assertEqual(state["codec"], "opus/48000/2")
        self.assertEqual(self.tx.request("GET", location)[0], 401)
        self.assertEqual(self.tx.request("DELETE", location, headers=auth)[0], 204)
        status, _, body = self.tx.request("GET", location, headers=auth)
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["state"], "ended")
        self.assertEqual(json.loads(body)["end_reason"], "deleted")
        # A repeated DELETE (a WHIP client hanging up twice) gets the final state, as GET does.
        status, headers, body = self.tx.request("DELETE", location, headers=auth)
        self.assertEqual(status, 200, body)
        self.assertEqual(headers["content-type"], "application/json")
        self.assertEqual(json.loads(body)["end_reason"], "deleted")
        self.assertEqual(self.tx.request("GET", "/v1/sessions/" + "0" * 32, headers=auth)[0], 404)
        self.assertEqual(self.tx.request("DELETE", "/v1/sessions/" + "0" * 32, headers=auth)[0], 404)
        self.assertEqual(self.tx.request("GET", "/v1/sessions/../../etc", headers=auth)[0], 404)

    def test_delete_after_the_session_ended_by_itself_returns_its_final_state(self):
        # What a WHIP client does on hang-up: the session already ended (here by the connect
        # timeout, as by a DTLS close), then DELETE arrives. 200 with the same JSON as GET.
        location, auth, state = self.offer_left_to_time_out()
        status, reply_headers, body = self.tx.request("DELETE", location, headers=auth)
        self.assertEqual(status, 200, body)
        self.assertEqual(reply_headers["content-type"], "application/json")
        self.assertEqual(json.loads(body), state)
        self.assertEqual(self.tx.request("DELETE", location)[0], 401)

    def test_media_type_and_auth_scheme_are_case_insensitive_tokens(self):
        for content_type in ("APPLICATION/SDP", "Application/Sdp", "application/sdp; charset=utf-8",
                             "application/sdp ;foo=bar"):
            status, _, body = self.tx.offer(chrome_offer(), content_type=content_type)
            self.assertEqual(status, 201, f"{content_type}: {body}")
        for content_type in ("application/sdpXYZ", "application/sdp-x", "application/sdp/x", "application",
                             "text/sdp", "application/sdp x", ""):
            status, _, body = self.tx.offer(chrome_offer(), content_type=content_type)
            self.assertEqual(status, 415, f"{content_type!r}: {body}")
        for scheme in ("bearer", "BEARER", "Bearer", "bEaReR"):
            headers = {"Content-Type": "application/sdp", "Authorization": f"{scheme} {API_KEY}"}
            status, _, body = self.tx.request("POST", "/v1/sessions", chrome_offer(), headers)
            self.assertEqual(status, 201, f"{scheme}: {body}")
        for value in (f"Basic {API_KEY}", f"Bearer{API_KEY}", f"Bearerx {API_KEY}", f"Bearer {API_KEY}x",
                      "Bearer", API_KEY):
            headers = {"Content-Type": "application/sdp", "Authorization": value}
            self.assertEqual(self.tx.request("POST", "/v1/sessions", chrome_offer(), headers)[0], 401, value)

    def test_header_and_uri_overflow_get_431_and_414(self):
        port = self.tx.http_port
        status, text = raw_request(port, b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(status, 414, text[:200])
        status, text = raw_request(port, b"GET /" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(status, 414, text[:200])
        status, text = raw_request(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 20000 +
                                   b"\r\n\r\n")
        self.assertEqual(status, 431, text[:200])
        many = b"".join(b"X-H%d: %s\r\n" % (i, b"v" * 100) for i in range(300))
        status, text = raw_request(port, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + many + b"\r\n")
        self.assertEqual(status, 431, text[:200])
        self.assertEqual(self.tx.request("GET", "/healthz")[0], 200)

    def test_opus_payload_type_colliding_with_rtcp_is_refused(self):
        offer = chrome_offer()
        pt = re.search(r"a=rtpmap:(\d+) opus/48000/2", offer).group(1)
        offer = re.sub(rf"\b{pt}\b", "77", offer)
        status, _, body = self.tx.offer(offer)
        self.assertEqual(status, 400, body)
        self.assertIn("RTCP", body)

    def test_api_key_required(self):
        status, headers, _ = self.tx.offer(chrome_offer(), key=None)
        self.assertEqual(status, 401)
        self.assertEqual(headers.get("www-authenticate"), "Bearer")
        self.assertEqual(self.tx.offer(chrome_offer(), key="wrong-key-0123456789")[0], 401)
        self.assertGreaterEqual(metric(self.tx.metrics(), "rtcedge_transceiver_sessions_rejected_total",
                                       {"reason": "unauthorized"}), 2)

    def test_content_type_and_body_limit(self):
        self.assertEqual(self.tx.offer(chrome_offer(), content_type="text/plain")[0], 415)
        status, _, body = self.tx.offer("v=0\r\n" + "a=x\r\n" * 400000)
        self.assertEqual(status, 413, body)

    def test_hostile_sdp_names_line_and_reason(self):
        cases = {
            "garbage \x00\x01": r"line 1",
            chrome_offer().replace("a=rtcp-mux\r\n", ""): r"rtcp-mux",
            re.sub(r"a=fingerprint:[^\r]*\r\n", "", chrome_offer()): r"fingerprint",
            re.sub(r"a=rtpmap:\d+ opus/48000/2\r\n", "", chrome_offer()): r"(?i)opus",
            re.sub(r"m=audio[\s\S]*", "", chrome_offer()): r"(?i)audio",
        }
        for sdp, reason in cases.items():
            status, _, body = self.tx.offer(sdp)
            self.assertEqual(status, 400, body)
            self.assertRegex(body, reason)
        self.assertGreaterEqual(metric(self.tx.metrics(), "rtcedge_transceiver_sessions_rejected_total",
                                       {"reason": "bad_sdp"}), len(cases))

    def test_cors(self):
        status, headers, _ = self.tx.request("OPTIONS", "/v1/sessions", headers={
            "Origin": "https://app.example", "Access-Control-Request-Method": "POST"})
        self.assertEqual(status, 204)
        self.assertIn("POST", headers["access-control-allow-methods"])
        self.assertIn("Authorization", headers["access-control-allow-headers"])
        status, headers, _ = self.tx.offer(chrome_offer(), extra={"Origin": "https://app.example"})
        self.assertEqual(status, 201)
        self.assertEqual(headers["access-control-allow-origin"], "*")
        self.assertIn("Location", headers["access-control-expose-headers"])

    def test_unconnected_session_ends_by_itself(self):
        state = self.offer_left_to_time_out()[2]
        self.assertEqual(state["end_reason"], "connect_timeout")
        self.assertGreaterEqual(metric(self.tx.metrics(), "rtcedge_transceiver_sessions_ended_total",
                                       {"reason": "connect_timeout"}), 1)

    def test_demo_page_health_and_metrics(self):
        status, headers, body = self.tx.request("GET", "/")
        self.assertEqual(status, 200)
        self.assertIn("text/html", headers["content-type"])
        self.assertIn("Talk", body)
        self.assertEqual(self.tx.request("GET", "/healthz")[0], 200)
        self.assertEqual(self.tx.request("GET", "/readyz")[0], 200)
        text = self.tx.metrics()
        self.assertIsNotNone(metric(text, "rtcedge_transceiver_sessions_active_total"))
        self.assertIsNotNone(metric(text, "rtcedge_transceiver_session_setup_seconds_count"))
        self.assertEqual(self.tx.request("GET", "/nope")[0], 404)

    def test_datagram_drops_are_counted(self):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            # A STUN Binding request for a ufrag nobody owns, and a DTLS record from nowhere.
            txid = os.urandom(12)
            user = b"AAAAAAAAAAAAAAAA:abcd"
            attr = (0x0006).to_bytes(2, "big") + len(user).to_bytes(2, "big") + user + b"\0" * ((4 - len(user) % 4) % 4)
            stun = (1).to_bytes(2, "big") + len(attr).to_bytes(2, "big") + bytes.fromhex("2112a442") + txid + attr
            for port in (self.tx.media_port, self.tx.media_port + 1):
                s.sendto(stun, ("127.0.0.1", port))
                s.sendto(b"\x16\xfe\xfd" + b"\0" * 20, ("127.0.0.1", port))
                s.sendto(b"\x70hello", ("127.0.0.1", port))
        finally:
            s.close()

        def counted():
            t = self.tx.metrics()
            return all((metric(t, "rtcedge_transceiver_datagrams_dropped_total", {"reason": r}) or 0) >= 2
                       for r in ("unknown_ufrag", "unknown_tuple", "not_webrtc"))
        wait_for(counted, 5, "drops counted by reason")


class Admission(unittest.TestCase):
    def test_rate_limit_then_capacity(self):
        tx = Transceiver("--sessions-setup-rate", "1", "--sessions-setup-burst", "2")
        try:
            codes = [tx.offer(chrome_offer(), key=None) for _ in range(3)]
            self.assertEqual([c[0] for c in codes[:2]], [201, 201])
            self.assertEqual(codes[2][0], 429)
            self.assertEqual(codes[2][1]["retry-after"], "1")
        finally:
            tx.stop()
        tx = Transceiver("--sessions-max-per-worker", "1")
        try:
            self.assertEqual(tx.offer(chrome_offer(), key=None)[0], 201)
            status, headers, body = tx.offer(chrome_offer(), key=None)
            self.assertEqual(status, 503, body)
            self.assertIn("retry-after", headers)
        finally:
            tx.stop()

    def test_sigterm_drains(self):
        tx = Transceiver("--sessions-drain-timeout", "2s")
        try:
            self.assertEqual(tx.offer(chrome_offer(), key=None)[0], 201)
            tx.proc.send_signal(signal.SIGTERM)
            wait_for(lambda: tx.request("GET", "/readyz")[0] == 503, 5, "/readyz to fail while draining")
            status, headers, _ = tx.offer(chrome_offer(), key=None)
            self.assertEqual(status, 503)
            self.assertIn("retry-after", headers)
            self.assertEqual(tx.proc.wait(timeout=10), 0)
            self.assertIn("drained", tx.output())
        finally:
            tx.stop()


class Placement(unittest.TestCase):
    def test_sessions_spread_over_workers_and_capacity_is_per_worker(self):
        tx = Transceiver("--sessions-max-per-worker", "3", "--sessions-setup-burst", "100", workers=2)
        try:
            codes = [tx.offer(chrome_offer(), key=None) for _ in range(7)]
            self.assertEqual([c[0] for c in codes], [201] * 6 + [503])
            # The session id names its worker's endpoint in bytes 1-2 (session_id.h): three on each.
            workers = sorted(int(c[1]["location"].rsplit("/", 1)[1][2:6], 16) for c in codes[:6])
            self.assertEqual(workers, [1] * 3 + [2] * 3)
            text = tx.metrics()
            self.assertEqual(metric(text, "rtcedge_transceiver_sessions_active", {"endpoint": "1"}), 3)
            self.assertEqual(metric(text, "rtcedge_transceiver_sessions_active", {"endpoint": "2"}), 3)
            self.assertEqual(metric(text, "rtcedge_transceiver_sessions_active_total"), 6)
        finally:
            tx.stop()


class IngressAnswer(unittest.TestCase):
    """The global relay (docs/global-relay.md): the answer names the ingress VIPs of the
    client's region first (the front door's header, else the client's address), this
    cluster's relay.vips after them; the metric counts how each was chosen."""

    def test_region_header_then_client_address_then_fallback(self):
        cfg = tempfile.NamedTemporaryFile("w", prefix="rtce-ingress-", suffix=".yaml", delete=False)
        self.addCleanup(os.unlink, cfg.name)
        json.dump({"relay": {"vips": ["198.18.10.1:3478"], "ingress_header": "X-Rtcedge-Region",
                             "ingress_regions": [{"region": "eu", "vips": "198.18.20.1:3478"},
                                                 {"region": "lo", "vips": "198.18.30.1:3478",
                                                  "sources": "127.0.0.0/8"}]},
                   "hint": {"key_file": os.path.join(REPO_ROOT, "tests", "golden", "hint-keys.yaml")}}, cfg)
        cfg.close()
        tx = Transceiver("--config", cfg.name)
        self.addCleanup(tx.stop)

        def candidates(extra):
            status, _, body = tx.offer(chrome_offer(), key=None, extra=extra)
            self.assertEqual(status, 201, body)
            return [" ".join(line.split()[4:6]) for line in body.splitlines() if line.startswith("a=candidate:")]

        self.assertEqual(candidates({"X-Rtcedge-Region": "EU"}), ["198.18.20.1 3478", "198.18.10.1 3478"])
        # No header (or an unknown region): the client is on loopback, the "lo" region's sources.
        self.assertEqual(candidates({}), ["198.18.30.1 3478", "198.18.10.1 3478"])
        self.assertEqual(candidates({"X-Rtcedge-Region": "mars"})[0], "198.18.30.1 3478")
        text = tx.metrics()
        self.assertEqual(metric(text, "rtcedge_transceiver_ingress_selected_total", {"how": "header"}), 1)
        self.assertEqual(metric(text, "rtcedge_transceiver_ingress_selected_total", {"how": "source"}), 2)
        self.assertEqual(metric(text, "rtcedge_transceiver_ingress_selected_total", {"how": "fallback"}), 0)


class BodyLimit(unittest.TestCase):
    def test_max_body_bytes_above_64k_is_the_one_limit(self):
        tx = Transceiver("--http-max-body-bytes", "262144")
        try:
            offer = padded_offer(100 * 1024)
            status, _, body = tx.offer(offer, key=None)
            self.assertEqual(status, 201, body[:300])
            status, _, body = tx.offer(padded_offer(300 * 1024), key=None)
            self.assertEqual(status, 413, body[:300])
        finally:
            tx.stop()


class ConnectionLimits(unittest.TestCase):
    """http.max_connections and running out of file descriptors: /healthz keeps answering and
    the HTTP thread does not spin."""

    def assert_quiet(self, pid, port, window=1.0):
        # A spinning accept loop keeps its thread runnable ("R") in every sample, whatever the
        # machine's load; a thread waiting for connections is asleep ("S") almost always.
        # /healthz is asked during the window, so the server is not merely idle.
        samples, running = 0, {}
        started = time.monotonic()
        while time.monotonic() - started < window:
            for tid, state in thread_states(pid).items():
                running[tid] = running.get(tid, 0) + (state == "R")
            samples += 1
            if samples % 5 == 0:
                self.assertTrue(healthz_ok(port), "/healthz while sampling")
            time.sleep(0.02)  # the sampling interval
        busiest = max(running.values()) / samples
        self.assertLess(busiest, 0.5, f"a thread was running in {busiest:.0%} of {samples} samples: it spins")

    def test_connections_above_the_cap_close_the_idlest(self):
        tx = Transceiver("--http-max-connections", "20")
        conns = []
        try:
            conns = open_idle_connections(tx.http_port, 60)
            wait_for(lambda: healthz_ok(tx.http_port), 5, "/healthz above the connection cap")
            text = tx.metrics()
            self.assertLessEqual(metric(text, "rtcedge_http_connections_open", {"server": "signaling"}), 20)
            self.assertGreaterEqual(metric(text, "rtcedge_http_connections_evicted_total",
                                           {"server": "signaling", "reason": "at_cap"}), 40)
            # The oldest idle connections were the ones closed.
            conns[0].settimeout(2)
            self.assertEqual(conns[0].recv(1), b"")
            self.assert_quiet(tx.proc.pid, tx.http_port)
        finally:
            for c in conns:
                c.close()
            tx.stop()

    def test_out_of_file_descriptors_backs_off_and_keeps_answering(self):
        # Fewer descriptors than the default cap: accept fails with EMFILE.
        tx = Transceiver(open_files=128)
        conns = []
        try:
            conns = open_idle_connections(tx.http_port, 300)
            wait_for(lambda: healthz_ok(tx.http_port), 5, "/healthz with descriptors exhausted")
            self.assert_quiet(tx.proc.pid, tx.http_port)
            self.assertGreaterEqual(metric(tx.metrics(), "rtcedge_http_connections_evicted_total",
                                           {"server": "signaling", "reason": "out_of_descriptors"}), 1)
        finally:
            for c in conns:
                c.close()
            tx.stop()

    def test_open_files_limit_is_raised_to_the_hard_limit_at_start(self):
        tx = Transceiver(open_files=256, open_files_hard=4096)
        try:
            self.assertEqual(open_files_limits(tx.proc.pid), (4096, 4096))
        finally:
            tx.stop()

    def test_relay_admin_server_out_of_file_descriptors(self):
        keys = tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False)
        subprocess.run([ARGS.relay, "hint", "keygen", "--id", "1"], stdout=keys, check=True, timeout=10)
        keys.close()
        admin = free_port()
        relay = subprocess.Popen([ARGS.relay, "--hint-key-file", keys.name, "--listen",
                                  f"127.0.0.1:{free_port(socket.SOCK_DGRAM)}", "--admin-listen",
                                  f"127.0.0.1:{admin}", "--workers", "1", "--pin-cpus", "false",
                                  "--endpoints", "1=127.0.0.1:40001"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 preexec_fn=limit_open_files(128))
        conns = []
        try:
            def healthy():
                if relay.poll() is not None:
                    raise AssertionError(f"relay exited with {relay.returncode}")
                return healthz_ok(admin)
            wait_for(healthy, 10, "relay /healthz")
            conns = open_idle_connections(admin, 300)
            wait_for(healthy, 5, "relay /healthz with many idle admin connections")
            self.assert_quiet(relay.pid, admin)
            with socket.create_connection(("127.0.0.1", admin), timeout=5) as s:
                s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
                text = b""
                while chunk := s.recv(65536):
                    text += chunk
            text = text.decode()
            self.assertTrue(text.startswith("HTTP/1.0 200"), text[:200])
            self.assertGreaterEqual(metric(text.split("\r\n\r\n", 1)[1], "rtcedge_http_connections_evicted_total",
                                           {"server": "admin", "reason": "out_of_descriptors"}), 1)
        finally:
            for c in conns:
                c.close()
            relay.kill()
            relay.wait(timeout=10)
            os.unlink(keys.name)


class Configuration(unittest.TestCase):
    def run_bad(self, *argv):
        r = subprocess.run([ARGS.transceiver, *argv], capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 2, r.stderr)
        return r.stderr

    def test_errors_name_the_key(self):
        self.assertIn("http.api_keys", self.run_bad("--http-listen", "0.0.0.0:0"))
        self.assertIn("audio.sample_rate", self.run_bad("--audio-sample-rate", "44100"))
        self.assertIn("hint.key_file", self.run_bad("--relay-vips", "127.0.0.1:3478"))
        self.assertIn("backend.url", self.run_bad("--backend-url", "http://x"))
        self.assertIn("relay.sources", self.run_bad("--relay-sources", "10.0.0.0/99"))
        self.assertIn("http.max_connections", self.run_bad("--http-max-connections", "0"))
        # The same key, declared once, exists for the relay too.
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as keys:
            subprocess.run([ARGS.relay, "hint", "keygen"], stdout=keys, check=True, timeout=10)
            keys.flush()
            r = subprocess.run([ARGS.relay, "--hint-key-file", keys.name, "--http-max-connections", "0"],
                               capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("http.max_connections", r.stderr)
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write("http:\n  lisen: 127.0.0.1:1\n")
            f.flush()
            self.assertIn("lisen", self.run_bad("--config", f.name))


if __name__ == "__main__":
    unittest_main(globals(), "--transceiver", "--relay")
