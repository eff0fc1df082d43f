#!/usr/bin/python3
"""Any pod answers for any call (issue 27 §2): two transceivers registered in a real
redis-server this test starts on loopback, sharing the fleet's hint key, API keys and
ephemeral-key secrets. A call made on pod A is read (GET), ICE-restarted (PATCH), watched and
steered over a sideband WebSocket, hung up and DELETEd through pod B, which forwards each to A
(its id names A's endpoint, the registry A's signaling address). A forged id is refused by B
without a forward; another key's call answers 404 through B as on A; an ek_ key makes one call
in the whole fleet (Redis counts it); once A is gone B answers 502 owner_unreachable until A's
record expires, then 404; with Redis gone too, B counts a key's calls itself. A phone call
whose webhook A answered streams through B (the provider's stream URL is the fleet's, so it
lands on any pod): B bridges it to A, the caller's tone comes back. Every wait has a
deadline."""

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support", "py"))
from rtcetest.redis import REDIS_CLI, REDIS_SERVER, RedisServer as Redis  # noqa: E402
from rtcetest.core import free_port, free_port_run, unittest_main, wait_for  # noqa: E402
from prom_metrics import metric  # noqa: E402
sys.path.insert(0, os.path.join(HERE, "..", "telephony"))
import twilio_provider as tp  # noqa: E402

import websockets  # noqa: E402  (python3-websockets, scripts/install-deps.sh)

ARGS = None
API_KEY = "fleet-key-0123456789abcdef"
OTHER_KEY = "other-tenant-0123456789abcdef"
SECRET = "fleet:" + "rtcedge-fleet-secret-0123456789abcdef"
CORPUS = os.path.join(HERE, "..", "sdp", "corpus")
TWILIO_TOKEN = "fleet-twilio-auth-token-0123456789"


def offer():
    with open(os.path.join(CORPUS, "chrome_audio_video_data_offer.sdp")) as f:
        return f.read()


class Pod:
    def __init__(self, redis_port, identity, keys_file, token_file, workers=2):
        self.http = free_port()
        media = free_port_run(workers)
        self.log = tempfile.NamedTemporaryFile(prefix=f"rtce-{identity}-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [ARGS.transceiver, "--http-listen", f"127.0.0.1:{self.http}", "--workers", str(workers),
             "--media-base-port", str(media), "--registry-redis-url", f"redis://127.0.0.1:{redis_port}",
             "--registry-pod-identity", identity, "--registry-ttl", "3s", "--hint-key-file", keys_file,
             "--http-api-keys", f"{API_KEY},{OTHER_KEY}", "--realtime-key-secrets", SECRET,
             "--sessions-connect-timeout", "60s", "--telephony-twilio-auth-token-file", token_file],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(self.ready, 15, f"{identity} /readyz")

    def ready(self):
        if self.proc.poll() is not None:
            with open(self.log.name) as f:
                raise AssertionError(f"transceiver exited: {f.read()[-2000:]}")
        return self.request("GET", "/readyz")[0] == 200

    def request(self, method, path, body=None, headers=None, key=None):
        headers = dict(headers or {})
        if key:
            headers["Authorization"] = f"Bearer {key}"
        data = body.encode() if isinstance(body, str) else body
        req = urllib.request.Request(f"http://127.0.0.1:{self.http}{path}", data=data, method=method,
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, {k.lower(): v for k, v in r.headers.items()}, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read().decode()
        except OSError:
            return None, {}, ""

    def metrics(self):
        return self.request("GET", "/metrics")[2]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.log.name)


def error_code(text):
    try:
        return json.loads(text)["error"]["code"]
    except (ValueError, KeyError, TypeError):
        return None


class FleetRouting(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        for tool in (REDIS_SERVER, REDIS_CLI):
            if not os.access(tool, os.X_OK):
                raise AssertionError(f"{tool} missing (scripts/install-deps.sh installs redis-server)")
        cls.redis = Redis()
        cls.keys = tempfile.NamedTemporaryFile("w", prefix="rtce-keys-", suffix=".yaml", delete=False)
        cls.keys.write("keys:\n  - id: 1\n    secret: %s\n" % os.urandom(16).hex())
        cls.keys.close()
        os.chmod(cls.keys.name, 0o600)
        cls.token = tempfile.NamedTemporaryFile("w", prefix="rtce-twilio-", suffix=".txt", delete=False)
        cls.token.write(TWILIO_TOKEN + "\n")
        cls.token.close()
        os.chmod(cls.token.name, 0o600)
        cls.a = Pod(cls.redis.port, "pod-a", cls.keys.name, cls.token.name)
        cls.b = Pod(cls.redis.port, "pod-b", cls.keys.name, cls.token.name)
        # Each pod has seen the other's records (the registry watch) before a test runs.
        wait_for(lambda: cls.redis.cli("SCARD", "rtce:{c0}:eps") == "4", 10, "four endpoints registered")

    @classmethod
    def tearDownClass(cls):
        for pod in (cls.a, cls.b):
            pod.stop()
        cls.redis.stop()
        os.unlink(cls.keys.name)
        os.unlink(cls.token.name)

    def create_on_a(self, key=API_KEY):
        status, headers, answer = self.a.request("POST", "/v1/realtime/calls", offer(),
                                                 {"Content-Type": "application/sdp"}, key)
        self.assertEqual(status, 201, answer)
        return headers["location"].rsplit("/", 1)[-1]

    def forwarded(self, kind):
        return metric(self.b.metrics(), "rtcedge_transceiver_calls_forwarded_total", {"kind": kind}) or 0

    def test_every_call_operation_through_the_other_pod(self):
        call = self.create_on_a()
        before = self.forwarded("http")
        status, _, text = wait_for(
            lambda: (lambda r: r if r[0] == 200 else None)(self.b.request("GET", f"/v1/realtime/calls/{call}",
                                                                             key=API_KEY)),
            5, "GET via B")
        self.assertEqual(json.loads(text)["id"], call[len("rtc_"):])
        # The ICE restart PATCH: new credentials through B, the owner's ETag back.
        restart = ("a=ice-ufrag:NewUfrag1\r\na=ice-pwd:aNewPasswordOf24CharsXYZ\r\n"
                   "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\n")
        status, headers, fragment = self.b.request(
            "PATCH", f"/v1/realtime/calls/{call}", restart,
            {"Content-Type": "application/trickle-ice-sdpfrag", "If-Match": '"1"'}, API_KEY)
        self.assertEqual(status, 200, fragment)
        self.assertEqual(headers.get("etag"), '"2"')
        self.assertIn("a=ice-ufrag:", fragment)
        status, _, text = self.a.request("GET", f"/v1/realtime/calls/{call}", key=API_KEY)
        self.assertEqual(json.loads(text)["ice_generation"], 2, "the restart reached the owner")
        # The WHIP path too.
        status, _, text = self.b.request("GET", f"/v1/sessions/{call[len('rtc_'):]}", key=API_KEY)
        self.assertEqual(status, 200, text)
        self.assertGreaterEqual(self.forwarded("http") - before, 3)

        # The sideband through B: events both ways, then B's hangup ends the call on A and
        # closes the bridged socket with the call's end.
        async def sideband():
            url = f"ws://127.0.0.1:{self.b.http}/v1/realtime?call_id={call}"
            async with websockets.connect(url, extra_headers={"Authorization": f"Bearer {API_KEY}"},
                                          open_timeout=5) as ws:
                created = json.loads(await asyncio.wait_for(ws.recv(), 5))
                self.assertEqual(created["type"], "session.created")
                await ws.send(json.dumps({"type": "session.update", "session": {"instructions": "via pod B"}}))
                updated = json.loads(await asyncio.wait_for(ws.recv(), 5))
                self.assertEqual(updated["type"], "session.updated")
                self.assertEqual(updated["session"]["instructions"], "via pod B")
                status, _, text = await asyncio.get_running_loop().run_in_executor(
                    None, lambda: self.b.request("POST", f"/v1/realtime/calls/{call}/hangup", b"", None, API_KEY))
                self.assertEqual(status, 200, text)
                ended = json.loads(await asyncio.wait_for(ws.recv(), 5))
                self.assertEqual(ended, dict(ended, type="rtcedge.call.ended", reason="deleted"))
                with self.assertRaises(websockets.ConnectionClosedOK) as closed:
                    await asyncio.wait_for(ws.recv(), 5)
                self.assertEqual(closed.exception.rcvd.code, 1000)

        asyncio.run(sideband())
        self.assertGreaterEqual(self.forwarded("websocket"), 1)
        # The session on A kept the sideband's instructions and ended by the hangup.
        status, _, text = self.a.request("GET", f"/v1/realtime/calls/{call}", key=API_KEY)
        self.assertEqual(json.loads(text)["state"], "ended", text)
        # DELETE of another call through B.
        second = self.create_on_a()
        status, _, text = self.b.request("DELETE", f"/v1/realtime/calls/{second}", key=API_KEY)
        self.assertEqual(status, 204, text)

    def test_forged_ids_and_other_keys_get_404_without_a_forward(self):
        call = self.create_on_a()
        wait_for(lambda: self.b.request("GET", f"/v1/realtime/calls/{call}", key=API_KEY)[0] == 200, 5,
                 "B forwards A's call")
        before = self.forwarded("http") + self.forwarded("websocket")
        # Flip one hex digit of the random part: the MAC no longer matches.
        forged = call[:12] + ("0" if call[12] != "0" else "1") + call[13:]
        for method, path in (("GET", f"/v1/realtime/calls/{forged}"), ("DELETE", f"/v1/realtime/calls/{forged}"),
                             ("POST", f"/v1/realtime/calls/{forged}/hangup"),
                             ("GET", f"/v1/sessions/{forged[len('rtc_'):]}")):
            status, _, text = self.b.request(method, path, b"" if method == "POST" else None, None, API_KEY)
            self.assertEqual(status, 404, f"{method} {path}: {text}")
        self.assertEqual(self.forwarded("http") + self.forwarded("websocket"), before, "a forged id was forwarded")
        # Another tenant's key: the owner's ownership check answers through B exactly as on A.
        for pod in (self.a, self.b):
            status, _, text = pod.request("GET", f"/v1/realtime/calls/{call}", key=OTHER_KEY)
            self.assertEqual((status, error_code(text)), (404, "call_not_found"), text)

    def webhooks(self, pod, outcome):
        return metric(pod.metrics(), "rtcedge_transceiver_telephony_webhooks_total",
                      {"provider": "twilio", "outcome": outcome}) or 0

    def test_a_phone_stream_through_the_other_pod(self):
        provider = tp.TwilioProvider(self.a.http, TWILIO_TOKEN)
        call = provider.answer({"agent": "fleet"})
        # The provider retrying on another pod (its first answer lost): B finds A's claim on the
        # CallSid in Redis and passes the webhook to A, whose answer is the same stream.
        on_b = tp.TwilioProvider(self.b.http, TWILIO_TOKEN)
        forwarded_before = self.webhooks(self.b, "forwarded")
        retry = on_b.post_webhook(call.fields, {"agent": "fleet"})
        self.assertEqual(retry.status, 200, retry)
        self.assertEqual(retry.twiml.stream_url, call.stream_url)
        self.assertEqual(self.webhooks(self.b, "forwarded") - forwarded_before, 1)
        # The stream URL names A's call; B is where the provider's connection landed.
        via_b = call.stream_url.replace(f":{self.a.http}/", f":{self.b.http}/")
        self.assertNotEqual(via_b, call.stream_url)
        before = self.forwarded("websocket")

        async def stream():
            s = await provider.stream(call, url=via_b).begin()
            try:
                await s.send_audio(tp.tone_frames(1000, 1.5))
                await s.wait_until(lambda: len(s.audible()) >= 30, 5, "30 media of the echoed tone via B")
                pcm = b"".join(m.pcm() for m in s.audible())
                self.assertGreaterEqual(tp.tone_margin_db(pcm, 1000, (500, 1500, 2300)), 10)
                await s.send_stop()
                self.assertEqual(await s.wait_closed(5), 1000)
            finally:
                await s.shutdown()

        asyncio.run(stream())
        self.assertEqual(self.forwarded("websocket") - before, 1)
        # A replay after the stream opened, on either pod, is refused.
        for pod in (self.a, self.b):
            replay = tp.TwilioProvider(pod.http, TWILIO_TOKEN).post_webhook(call.fields, {"agent": "fleet"})
            self.assertEqual(replay.status, 403, replay)
        status, _, text = wait_for(
            lambda: (lambda r: r if json.loads(r[2] or "{}").get("state") == "ended" else None)(
                self.a.request("GET", f"/v1/sessions/{call.session_id}", key=API_KEY)), 5, "A's phone call ended")
        snap = json.loads(text)
        self.assertEqual((snap["transport"], snap["end_reason"]), ("twilio", "provider_stopped"), snap)
        self.assertGreaterEqual(snap["telephony"]["media_in"], 70, snap)

    def mint(self, pod):
        status, _, text = pod.request("POST", "/v1/realtime/client_secrets", "{}", {"Content-Type": "application/json"},
                                      API_KEY)
        self.assertEqual(status, 200, text)
        return json.loads(text)["value"]

    def call_with(self, pod, key):
        status, _, text = pod.request("POST", "/v1/realtime/calls", offer(), {"Content-Type": "application/sdp"}, key)
        return status, error_code(text)

    def test_one_key_one_call_in_the_whole_fleet(self):
        key = self.mint(self.a)
        self.assertEqual(self.call_with(self.a, key)[0], 201)
        self.assertEqual(self.call_with(self.b, key), (403, "key_exhausted"), "the key's second call, on the other pod")
        self.assertGreaterEqual(metric(self.b.metrics(), "rtcedge_transceiver_realtime_key_calls_total",
                                       {"outcome": "fleet_exhausted"}), 1)

    def test_zz_an_owner_that_is_gone_is_502_until_its_record_expires_then_404(self):
        call = self.create_on_a()
        wait_for(lambda: self.b.request("GET", f"/v1/realtime/calls/{call}", key=API_KEY)[0] == 200, 5,
                 "B forwards A's call")
        self.a.proc.send_signal(signal.SIGKILL)
        self.a.proc.wait(timeout=10)
        # A's records live on for their 3 s TTL: B still names A as the owner, and says it is down.
        status, _, text = self.b.request("GET", f"/v1/realtime/calls/{call}", key=API_KEY)
        self.assertEqual((status, error_code(text)), (502, "owner_unreachable"), text)
        self.assertGreaterEqual(metric(self.b.metrics(), "rtcedge_transceiver_call_owner_unreachable_total"), 1)
        wait_for(lambda: self.b.request("GET", f"/v1/realtime/calls/{call}", key=API_KEY)[0] == 404, 10,
                 "404 once A's record expired")
        # Redis gone too: B counts a key's calls itself (one call per pod, counted as a fallback).
        key = self.mint(self.b)
        self.redis.proc.kill()
        self.redis.proc.wait(timeout=10)
        self.assertEqual(self.call_with(self.b, key)[0], 201)
        self.assertEqual(self.call_with(self.b, key), (403, "key_exhausted"))
        self.assertGreaterEqual(metric(self.b.metrics(), "rtcedge_transceiver_realtime_key_calls_total",
                                       {"outcome": "pod_fallback"}), 1)


if __name__ == "__main__":
    unittest_main(globals(), "--transceiver")
