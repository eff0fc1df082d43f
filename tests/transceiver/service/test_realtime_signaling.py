#!/usr/bin/python3
"""The Realtime-compatible signaling of rtcedge-transceiver, black box over HTTP on loopback
(Python standard library only): POST /v1/realtime/calls with raw SDP and with
multipart/form-data (201, Location rtc_<id>, an answer that accepts the data channel), the
older POST /v1/realtime, GET and hangup of a call, ephemeral keys from
/v1/realtime/client_secrets and the legacy /v1/realtime/sessions (shapes, limits, who may mint),
keys that must be refused (garbage, forged, signed by another fleet) and accepted (signed by
another pod of the same fleet), the JSON error shape of every refusal, text-only offers,
CORS for Realtime clients, admission (429/503 with Retry-After), the metrics, and the
configuration errors of the realtime keys. ICE and DTLS are not attempted. Every wait has a
deadline."""

import asyncio
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "sdp", "corpus")
ARGS = None
API_KEY = "test-key-0123456789abcdef"
SECRET = "fleet-a:" + "a" * 40
OTHER_SECRET = "fleet-b:" + "b" * 40

sys.path.insert(0, os.path.join(HERE, "..", "..", "support", "py"))
from rtcetest.core import unittest_main  # noqa: E402
from rtcetest.transceiver import TransceiverProcess, answer_lines  # noqa: E402
from prom_metrics import metric  # noqa: E402

import websockets  # noqa: E402  (python3-websockets, scripts/install-deps.sh)


def corpus(name):
    with open(os.path.join(CORPUS, name), "rb") as f:
        return f.read().decode()


def agents_offer():
    """Audio and the oai-events data channel, BUNDLE-d, no candidates: what
    @openai/agents-realtime POSTs right after setLocalDescription."""
    return corpus("chrome_audio_datachannel_offer.sdp")


def multipart(parts, boundary="rtcedge-test-boundary"):
    """(content type, body) of a form of (name, content type, text) parts."""
    body = ""
    for name, content_type, text in parts:
        body += f"--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n"
        if content_type:
            body += f"Content-Type: {content_type}\r\n"
        body += f"\r\n{text}\r\n"
    body += f"--{boundary}--\r\n"
    return f"multipart/form-data; boundary={boundary}", body


class Transceiver(TransceiverProcess):
    def __init__(self, *extra, workers=1):
        super().__init__(ARGS.transceiver, ["--media-base-port", "0", "--http-api-keys", API_KEY, *extra],
                         workers=workers, log_prefix="rtce-rt-")

    def call(self, body, key=API_KEY, content_type="application/sdp", path="/v1/realtime/calls", extra=None):
        return self.post(path, body, key, content_type, extra)

    def post_json(self, path, payload, key=API_KEY):
        body = payload if isinstance(payload, str) else json.dumps(payload)
        status, headers, text = self.post(path, body, key, "application/json")
        return status, headers, (json.loads(text) if text else None)

    def mint(self, payload=None, key=API_KEY):
        return self.post_json("/v1/realtime/client_secrets", payload if payload is not None else {}, key)

    def metrics(self):
        return self.metrics_text()


class RealtimeCase(unittest.TestCase):
    def assert_error(self, response, status, code, param=None, message=None):
        got_status, headers, text = response
        self.assertEqual(got_status, status, text)
        self.assertTrue(headers["content-type"].startswith("application/json"), headers)
        body = json.loads(text) if isinstance(text, str) else text
        error = body["error"]
        self.assertEqual(set(error), {"message", "type", "code", "param"}, body)
        self.assertEqual(error["code"], code, body)
        self.assertIsInstance(error["message"], str)
        self.assertTrue(error["message"])
        self.assertEqual(error["param"], param, body)
        if message:
            self.assertRegex(error["message"], message)
        return error


class Ownership(RealtimeCase):
    """Issue 27 §3: a call belongs to the key that created it, and an ek_ key's call also to
    the server key that minted that key (two server keys = two tenants). Every other key's
    GET, PATCH, DELETE and hangup gets the 404 of an unknown call, and leaves the call as it
    was."""

    OTHER_KEY = "test-key-tenant-b-0123456789"

    @classmethod
    def setUpClass(cls):
        cls.tx = Transceiver("--http-api-keys", f"{API_KEY},{cls.OTHER_KEY}", "--realtime-key-secrets", SECRET,
                             "--sessions-connect-timeout", "30s")

    @classmethod
    def tearDownClass(cls):
        cls.tx.stop()

    def ek(self, server_key):
        status, _, body = self.tx.mint({}, key=server_key)
        self.assertEqual(status, 200, body)
        return body["value"]

    def create(self, key):
        status, headers, answer = self.tx.call(agents_offer(), key=key)
        self.assertEqual(status, 201, answer)
        return headers["location"].rsplit("/", 1)[1]

    def act(self, method, call_id, key, tail="", body=None, extra=None):
        headers = {"Authorization": f"Bearer {key}", **(extra or {})}
        return self.tx.request(method, f"/v1/realtime/calls/{call_id}{tail}", body, headers)

    def assert_not_found(self, response):
        self.assert_error(response, 404, "call_not_found", "call_id")

    def every_operation_is_refused(self, call_id, key):
        restart = "a=ice-ufrag:Intruder1\r\na=ice-pwd:anIntrudersPasswordOf24Ch\r\n"
        frag = {"Content-Type": "application/trickle-ice-sdpfrag", "If-Match": "*"}
        self.assert_not_found(self.act("GET", call_id, key))
        self.assert_not_found(self.act("PATCH", call_id, key, body=restart, extra=frag))
        self.assert_not_found(self.act("DELETE", call_id, key))
        self.assert_not_found(self.act("POST", call_id, key, tail="/hangup"))

    def test_a_key_acts_only_on_its_own_calls(self):
        ek_a1, ek_a2, ek_b = self.ek(API_KEY), self.ek(API_KEY), self.ek(self.OTHER_KEY)
        call = self.create(ek_a1)
        for intruder in (ek_a2, ek_b, self.OTHER_KEY):
            with self.subTest(intruder=intruder[:12]):
                self.every_operation_is_refused(call, intruder)
        # Untouched: still ICE generation 1, still live, for its key and the key that minted it.
        for owner in (ek_a1, API_KEY):
            status, _, text = self.act("GET", call, owner)
            self.assertEqual(status, 200, text)
            self.assertEqual(json.loads(text)["ice_generation"], 1)
            self.assertNotEqual(json.loads(text)["state"], "ended")
        # The minting server key may end it.
        status, _, text = self.act("POST", call, API_KEY, tail="/hangup")
        self.assertEqual(status, 200, text)
        # An ended call stays its owners' (GET of the final state) and nobody else's.
        self.assertEqual(self.act("GET", call, ek_a1)[0], 200)
        self.assert_not_found(self.act("GET", call, ek_b))

    def test_a_server_keys_own_calls_are_not_its_ek_keys(self):
        call = self.create(API_KEY)
        for intruder in (self.ek(API_KEY), self.OTHER_KEY):
            with self.subTest(intruder=intruder[:12]):
                self.every_operation_is_refused(call, intruder)
        # The same session on the WHIP-style route: another tenant's key gets the plain 404.
        session = call[len("rtc_"):]
        status, _, text = self.tx.request("GET", f"/v1/sessions/{session}",
                                          headers={"Authorization": f"Bearer {self.OTHER_KEY}"})
        self.assertEqual(status, 404, text)
        status, _, text = self.tx.request("GET", f"/v1/sessions/{session}",
                                          headers={"Authorization": f"Bearer {API_KEY}"})
        self.assertEqual(status, 200, text)
        self.assertEqual(self.act("DELETE", call, API_KEY)[0], 204)

    def test_an_unknown_well_formed_call_is_the_same_json_404(self):
        unknown = "rtc_" + "0a" + "c" * 30
        self.every_operation_is_refused(unknown, API_KEY)


class Calls(RealtimeCase):
    @classmethod
    def setUpClass(cls):
        cls.tx = Transceiver("--realtime-key-secrets", SECRET, "--sessions-connect-timeout", "5s", workers=2)

    @classmethod
    def tearDownClass(cls):
        cls.tx.stop()

    def assert_data_channel_answer(self, status, headers, answer):
        lines = answer_lines(self, status, headers, answer, r"^/v1/realtime/calls/rtc_[0-9a-f]{32}$")
        self.assertIn("a=group:BUNDLE 0 1", lines)
        self.assertIn("m=application 9 UDP/DTLS/SCTP webrtc-datachannel", lines)
        self.assertIn("a=sctp-port:5000", lines)
        self.assertIn("a=max-message-size:262144", lines)
        self.assertIn("a=ice-lite", lines)
        self.assertTrue(any(l.startswith("m=audio 9 UDP/TLS/RTP/SAVPF 111") for l in lines))
        self.assertTrue(any(l.startswith("a=candidate:") for l in lines), "the answer must carry our candidate")
        # The same transport attributes in both sections.
        ufrags = [l for l in lines if l.startswith("a=ice-ufrag:")]
        self.assertEqual(len(ufrags), 2)
        self.assertEqual(ufrags[0], ufrags[1])
        return headers["location"].rsplit("/", 1)[1]

    def test_raw_sdp_call(self):
        status, headers, answer = self.tx.call(agents_offer(),
                                               extra={"X-OpenAI-Agents-SDK": "openai-agents-sdk.0.20.0"})
        self.assert_data_channel_answer(status, headers, answer)

    def test_multipart_call_get_and_hangup(self):
        content_type, body = multipart([("sdp", "application/sdp", agents_offer()),
                                        ("session", "application/json",
                                         json.dumps({"type": "realtime", "model": "gpt-realtime",
                                                     "instructions": "be brief"}))])
        status, headers, answer = self.tx.call(body, content_type=content_type)
        call_id = self.assert_data_channel_answer(status, headers, answer)
        status, _, text = self.tx.request("GET", f"/v1/realtime/calls/{call_id}",
                                          headers={"Authorization": f"Bearer {API_KEY}"})
        self.assertEqual(status, 200, text)
        self.assertEqual(json.loads(text)["id"], call_id[len("rtc_"):])
        status, headers, text = self.tx.request("POST", f"/v1/realtime/calls/{call_id}/hangup",
                                                headers={"Authorization": f"Bearer {API_KEY}"})
        self.assertEqual(status, 200, text)
        self.assertEqual(json.loads(text), {"id": call_id, "object": "realtime.call", "status": "ended"})
        # Ended: a second hangup finds no live call.
        self.assert_error(self.tx.request("POST", f"/v1/realtime/calls/{call_id}/hangup",
                                          headers={"Authorization": f"Bearer {API_KEY}"}),
                          404, "call_not_found", "call_id")

    def test_delete_of_a_call_ends_it(self):
        status, headers, answer = self.tx.call(agents_offer())
        call_id = self.assert_data_channel_answer(status, headers, answer)
        auth = {"Authorization": f"Bearer {API_KEY}"}
        status, _, text = self.tx.request("DELETE", f"/v1/realtime/calls/{call_id}", headers=auth)
        self.assertEqual(status, 204, text)
        self.assert_error(self.tx.request("POST", f"/v1/realtime/calls/{call_id}/hangup", headers=auth),
                          404, "call_not_found", "call_id")
        self.assert_error(self.tx.request("PUT", f"/v1/realtime/calls/{call_id}", headers=auth),
                          405, "method_not_allowed")

    def test_ice_restart_and_trickle_on_a_call(self):
        status, headers, answer = self.tx.call(agents_offer())
        call_id = self.assert_data_channel_answer(status, headers, answer)
        self.assertEqual(headers.get("etag"), '"1"')
        url = f"/v1/realtime/calls/{call_id}"
        frag_type = {"Content-Type": "application/trickle-ice-sdpfrag", "Authorization": f"Bearer {API_KEY}"}
        restart = ("a=ice-ufrag:NewUfrag1\r\na=ice-pwd:aNewPasswordOf24CharsXYZ\r\n"
                   "m=audio 9 UDP/TLS/RTP/SAVPF 111\r\na=mid:0\r\n")
        status, _, text = self.tx.request("PATCH", url, restart, frag_type)
        self.assertEqual(status, 428, text)  # a restart needs If-Match
        status, _, text = self.tx.request("PATCH", url, restart, dict(frag_type, **{"If-Match": '"7"'}))
        self.assertEqual(status, 412, text)
        status, _, text = self.tx.request("PATCH", url, "a=ice-ufrag:x\r\n", dict(frag_type, **{"If-Match": "*"}))
        self.assertEqual(status, 400, text)
        self.assertIn("line 1", text)
        status, _, text = self.tx.request("PATCH", url, restart,
                                          {"Content-Type": "application/sdp", "Authorization": f"Bearer {API_KEY}",
                                           "If-Match": "*"})
        self.assertEqual(status, 415, text)
        # RFC 9110: a list that names the current tag matches.
        status, headers, fragment = self.tx.request("PATCH", url, restart,
                                                    dict(frag_type, **{"If-Match": '"7", "1"'}))
        self.assertEqual(status, 200, fragment)
        self.assertTrue(headers["content-type"].startswith("application/trickle-ice-sdpfrag"), headers)
        self.assertEqual(headers.get("etag"), '"2"')
        self.assertIn("a=ice-lite", fragment)
        self.assertIn("a=mid:0", fragment)
        new_ufrag = next(l.split(":", 1)[1] for l in fragment.splitlines() if l.startswith("a=ice-ufrag:"))
        self.assertNotIn(new_ufrag, answer)  # new credentials, not the answer's
        # The same client ufrag again, with a candidate: trickle, which ICE-lite does not need.
        trickle = restart + "a=candidate:1 1 udp 2122260223 198.18.0.9 50000 typ host\r\n"
        status, _, text = self.tx.request("PATCH", url, trickle, dict(frag_type, **{"If-Match": '"2"'}))
        self.assertEqual(status, 204, text)
        status, _, text = self.tx.request("GET", url, headers={"Authorization": f"Bearer {API_KEY}"})
        self.assertEqual(json.loads(text)["ice_generation"], 2)
        self.assertTrue(json.loads(text)["ice_restart_pending"])

    def test_hangup_of_unknown_or_malformed_call_ids(self):
        auth = {"Authorization": f"Bearer {API_KEY}"}
        for call_id in ("rtc_" + "0" * 32, "rtc_" + "ff" * 16, "0" * 32, "rtc_XYZ", "rtc_"):
            with self.subTest(call_id=call_id):
                self.assert_error(self.tx.request("POST", f"/v1/realtime/calls/{call_id}/hangup", headers=auth),
                                  404, "call_not_found", "call_id")
        self.assert_error(self.tx.request("GET", "/v1/realtime/calls", headers=auth), 405, "method_not_allowed")
        self.assert_error(self.tx.request("POST", "/v1/realtime/nothing", headers=auth), 404, "not_found")

    def test_legacy_realtime_route_with_model_query(self):
        status, headers, answer = self.tx.call(agents_offer(), path="/v1/realtime?model=gpt-realtime")
        self.assert_data_channel_answer(status, headers, answer)

    def test_audio_only_offer_is_still_a_call(self):
        status, headers, answer = self.tx.call(corpus("chrome_audio_offer.sdp"))
        self.assertEqual(status, 201, answer)
        self.assertNotIn("m=application", answer)

    def test_json_errors_of_calls(self):
        error = self.assert_error(self.tx.call("v=0\r\no=- 1 2 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\nm=audio\r\n"),
                                  400, "invalid_offer", "sdp", r"line 5")
        self.assertEqual(error["type"], "invalid_request_error")
        self.assert_error(self.tx.call(corpus("chrome_datachannel_only_offer.sdp")), 400, "invalid_offer", "sdp",
                          r"text-only sessions are not allowed")
        content_type, body = multipart([("session", "application/json", "{}")])
        self.assert_error(self.tx.call(body, content_type=content_type), 400, "missing_sdp", "sdp")
        content_type, body = multipart([("sdp", "application/sdp", agents_offer()),
                                        ("session", "application/json", "[1, 2]")])
        self.assert_error(self.tx.call(body, content_type=content_type), 400, "invalid_session", "session")
        content_type, body = multipart([("sdp", "application/sdp", agents_offer()),
                                        ("session", "application/json",
                                         json.dumps({"instructions": "x" * 20000}))])
        self.assert_error(self.tx.call(body, content_type=content_type), 400, "invalid_session", "session",
                          r"larger than 16384 bytes")
        content_type, body = multipart([("sdp", "application/sdp", agents_offer()),
                                        ("session", "application/json", "[" * 5000 + "]" * 5000)])
        self.assert_error(self.tx.call(body, content_type=content_type), 400, "invalid_session", "session")
        self.assert_error(self.tx.call(body, content_type="multipart/form-data"), 400, "invalid_multipart",
                          message=r"no boundary")
        _, body = multipart([("sdp", "application/sdp", agents_offer())])
        self.assert_error(self.tx.call(body[:-8], content_type="multipart/form-data; boundary=rtcedge-test-boundary"),
                          400, "invalid_multipart")
        self.assert_error(self.tx.call(agents_offer(), content_type="text/plain"), 415, "unsupported_media_type")
        self.assertGreaterEqual(metric(self.tx.metrics(), "rtcedge_transceiver_realtime_calls_rejected_total",
                                       {"code": "invalid_offer"}), 2)

    def test_keys_that_are_refused(self):
        self.assert_error(self.tx.call(agents_offer(), key=None), 401, "invalid_api_key")
        self.assert_error(self.tx.call(agents_offer(), key="not-the-key-0123456789"), 401, "invalid_api_key")
        self.assert_error(self.tx.call(agents_offer(), key="ek_garbage"), 401, "invalid_api_key")
        self.assert_error(self.tx.call(agents_offer(), key="ek_" + "A" * 12000), 401, "invalid_api_key")
        status, _, minted = self.tx.mint({})
        self.assertEqual(status, 200, minted)
        value = minted["value"]
        claims, signature = value[3:].split(".")
        # A flipped signature character; and claims rewritten to live longer under the old signature.
        # The first character carries six signature bits; the last carries only four, and some
        # replacements there are non-canonical base64, refused before the signature is checked.
        flipped = ("A" if signature[0] != "A" else "B") + signature[1:]
        self.assert_error(self.tx.call(agents_offer(), key=f"ek_{claims}.{flipped}"), 401, "invalid_api_key",
                          message="signature")
        decoded = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
        decoded["exp"] += 3600
        forged = base64.urlsafe_b64encode(json.dumps(decoded).encode()).decode().rstrip("=")
        self.assert_error(self.tx.call(agents_offer(), key=f"ek_{forged}.{signature}"), 401, "invalid_api_key")
        # The genuine key still works.
        status, _, answer = self.tx.call(agents_offer(), key=value)
        self.assertEqual(status, 201, answer)

    def test_key_from_another_fleet_is_refused_and_from_another_pod_accepted(self):
        other_fleet = Transceiver("--realtime-key-secrets", OTHER_SECRET)
        same_fleet = Transceiver("--realtime-key-secrets", SECRET)
        try:
            status, _, foreign = other_fleet.mint({})
            self.assertEqual(status, 200, foreign)
            self.assert_error(self.tx.call(agents_offer(), key=foreign["value"]), 401, "invalid_api_key",
                              message="signature")
            status, _, sibling = same_fleet.mint({"session": {"model": "gpt-realtime"}})
            self.assertEqual(status, 200, sibling)
            # Stateless: this pod never saw the key, and accepts it.
            status, _, answer = self.tx.call(agents_offer(), key=sibling["value"])
            self.assertEqual(status, 201, answer)
        finally:
            other_fleet.stop()
            same_fleet.stop()

    def test_client_secrets_shape(self):
        before = int(time.time())
        status, _, body = self.tx.mint({"expires_after": {"anchor": "created_at", "seconds": 600},
                                        "session": {"type": "realtime", "model": "gpt-realtime",
                                                    "instructions": "hi"}})
        after = int(time.time())
        self.assertEqual(status, 200, body)
        self.assertEqual(set(body), {"value", "expires_at", "session"})
        self.assertTrue(body["value"].startswith("ek_"))
        self.assertGreaterEqual(body["expires_at"], before + 600)
        self.assertLessEqual(body["expires_at"], after + 600)
        session = body["session"]
        self.assertEqual(session["type"], "realtime")
        self.assertEqual(session["object"], "realtime.session")
        self.assertRegex(session["id"], r"^sess_[0-9a-f]{24}$")
        self.assertEqual(session["model"], "gpt-realtime")
        self.assertEqual(session["instructions"], "hi")
        # Defaults: 60 s, a filled session.
        status, _, body = self.tx.mint(None)
        self.assertEqual(status, 200, body)
        self.assertLessEqual(abs(body["expires_at"] - (int(time.time()) + 60)), 2)
        self.assertEqual(body["session"]["type"], "realtime")
        self.assertIn("model", body["session"])

    def test_legacy_sessions_shape(self):
        status, _, body = self.tx.post_json("/v1/realtime/sessions", {"model": "gpt-realtime", "voice": "verse"})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["object"], "realtime.session")
        self.assertEqual(body["voice"], "verse")
        self.assertRegex(body["id"], r"^sess_")
        secret = body["client_secret"]
        self.assertTrue(secret["value"].startswith("ek_"))
        self.assertLessEqual(abs(secret["expires_at"] - (int(time.time()) + 60)), 2)
        status, _, answer = self.tx.call(agents_offer(), key=secret["value"])
        self.assertEqual(status, 201, answer)

    def test_client_secrets_errors(self):
        for seconds in (9, 7201, "60", 60.5, -1):
            with self.subTest(seconds=seconds):
                self.assert_error(self.tx.mint({"expires_after": {"anchor": "created_at", "seconds": seconds}}),
                                  400, "invalid_expires_after", "expires_after.seconds")
        self.assert_error(self.tx.mint({"expires_after": {"anchor": "now", "seconds": 60}}), 400,
                          "invalid_anchor", "expires_after.anchor")
        self.assert_error(self.tx.mint({"expires_after": 60}), 400, "invalid_expires_after", "expires_after")
        self.assert_error(self.tx.mint({"session": "realtime"}), 400, "invalid_session", "session")
        self.assert_error(self.tx.mint("{not json"), 400, "invalid_json")
        self.assert_error(self.tx.mint("[]"), 400, "invalid_json")
        self.assert_error(self.tx.mint({}, key=None), 401, "invalid_api_key")
        self.assert_error(self.tx.mint({}, key="wrong-key-0123456789"), 401, "invalid_api_key")
        self.assert_error(self.tx.mint({"session": {"instructions": "x" * 15000}}), 400, "session_too_large",
                          "session")
        # An ek_ key cannot mint another one, valid or not.
        status, _, minted = self.tx.mint({})
        self.assertEqual(status, 200)
        self.assert_error(self.tx.mint({}, key=minted["value"]), 403, "ephemeral_key_not_allowed")
        self.assert_error(self.tx.post_json("/v1/realtime/sessions", {}, key=minted["value"]), 403,
                          "ephemeral_key_not_allowed")
        text = self.tx.metrics()
        self.assertGreaterEqual(metric(text, "rtcedge_transceiver_realtime_keys_refused_total",
                                       {"code": "invalid_expires_after"}), 5)
        self.assertGreaterEqual(metric(text, "rtcedge_transceiver_realtime_keys_refused_total",
                                       {"code": "ephemeral_key_not_allowed"}), 2)
        self.assertGreaterEqual(metric(text, "rtcedge_transceiver_realtime_keys_minted_total"), 1)

    def test_cors_for_realtime_clients(self):
        status, headers, _ = self.tx.request("OPTIONS", "/v1/realtime/calls", headers={
            "Origin": "https://app.example", "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type,x-openai-agents-sdk"})
        self.assertEqual(status, 204)
        allowed = [h.strip().lower() for h in headers["access-control-allow-headers"].split(",")]
        for header in ("authorization", "content-type", "x-openai-agents-sdk"):
            self.assertIn(header, allowed)
        self.assertIn("POST", headers["access-control-allow-methods"])
        status, headers, _ = self.tx.call(agents_offer(), extra={"Origin": "https://app.example"})
        self.assertEqual(status, 201)
        self.assertEqual(headers["access-control-allow-origin"], "*")
        self.assertIn("Location", headers["access-control-expose-headers"])
        # Errors carry CORS too, or the page cannot read error.message.
        status, headers, _ = self.tx.call(agents_offer(), key=None, extra={"Origin": "https://app.example"})
        self.assertEqual(status, 401)
        self.assertEqual(headers["access-control-allow-origin"], "*")
        # The operator's endpoints are for the scraper and the kubelet: no page may read them.
        for path in ("/metrics", "/healthz", "/readyz"):
            status, headers, _ = self.tx.request("GET", path, headers={"Origin": "https://app.example"})
            self.assertEqual(status, 200, path)
            self.assertNotIn("access-control-allow-origin", headers, path)

    def test_created_metric(self):
        before = metric(self.tx.metrics(), "rtcedge_transceiver_realtime_calls_created_total") or 0
        status, _, _ = self.tx.call(agents_offer())
        self.assertEqual(status, 201)
        self.assertEqual(metric(self.tx.metrics(), "rtcedge_transceiver_realtime_calls_created_total"), before + 1)


class Sideband(RealtimeCase):
    """The app server's WebSocket on a call: its bounds (the per-call cap, the flood limit)."""

    @classmethod
    def setUpClass(cls):
        cls.tx = Transceiver("--realtime-sideband-max-per-call", "2", "--sessions-connect-timeout", "30s")

    @classmethod
    def tearDownClass(cls):
        cls.tx.stop()

    def url(self, call_id):
        return f"ws://127.0.0.1:{self.tx.http_port}/v1/realtime?call_id={call_id}"

    def attach(self, call_id):
        return websockets.connect(self.url(call_id), extra_headers={"Authorization": f"Bearer {API_KEY}"},
                                  open_timeout=5)

    def test_the_per_call_cap_then_a_flood_closes_only_the_flooder(self):
        status, headers, _ = self.tx.call(agents_offer())
        self.assertEqual(status, 201)
        call_id = headers["location"].rsplit("/", 1)[1]

        async def run():
            async with self.attach(call_id) as first, self.attach(call_id) as second:
                for ws in (first, second):
                    self.assertEqual(json.loads(await asyncio.wait_for(ws.recv(), 5))["type"], "session.created")
                with self.assertRaises(websockets.InvalidStatusCode) as refused:
                    async with self.attach(call_id):
                        pass
                self.assertEqual(refused.exception.status_code, 409)
                # 300 messages at once: past the burst of 200 the flooder is closed with 1008.
                for i in range(300):
                    try:
                        await first.send(json.dumps({"type": "response.cancel", "event_id": f"flood_{i}"}))
                    except websockets.ConnectionClosed:
                        break
                with self.assertRaises(websockets.ConnectionClosed) as closed:
                    while True:
                        await asyncio.wait_for(first.recv(), 5)
                self.assertEqual(closed.exception.rcvd.code, 1008)
                # The other sideband and the call go on.
                await second.send(json.dumps({"type": "session.update", "session": {"instructions": "still here"}}))
                while True:
                    event = json.loads(await asyncio.wait_for(second.recv(), 5))
                    if event["type"] == "session.updated":
                        self.assertEqual(event["session"]["instructions"], "still here")
                        break

        asyncio.run(run())
        self.assertGreaterEqual(metric(self.tx.metrics(), "rtcedge_transceiver_sideband_sockets_closed_total",
                                       {"reason": "flood"}), 1)
        self.assertGreaterEqual(metric(self.tx.metrics(), "rtcedge_transceiver_sidebands_refused_total"), 1)


class Admission(RealtimeCase):
    def test_text_only_when_allowed(self):
        tx = Transceiver("--sessions-allow-text-only", "true")
        try:
            status, headers, answer = tx.call(corpus("chrome_datachannel_only_offer.sdp"))
            self.assertEqual(status, 201, answer)
            self.assertEqual([l for l in answer.split("\r\n") if l.startswith("m=")],
                             ["m=application 9 UDP/DTLS/SCTP webrtc-datachannel"])
            self.assertIn("a=group:BUNDLE 1", answer.split("\r\n"))
            # No configured secret: keys verify only here, and the log says so.
            self.assertIn("verify only on this pod", tx.output())
        finally:
            tx.stop()

    def test_capacity_then_rate_limit_are_json_with_retry_after(self):
        tx = Transceiver("--sessions-max-per-worker", "1", "--sessions-setup-rate", "1",
                         "--sessions-setup-burst", "2", "--sessions-connect-timeout", "30s")
        try:
            self.assertEqual(tx.call(agents_offer())[0], 201)
            response = tx.call(agents_offer())
            self.assert_error(response, 503, "at_capacity")
            self.assertEqual(response[1]["retry-after"], "2")
            response = tx.call(agents_offer())
            self.assert_error(response, 429, "rate_limited")
            self.assertEqual(response[1]["retry-after"], "1")
            self.assertEqual(metric(tx.metrics(), "rtcedge_transceiver_realtime_calls_rejected_total",
                                    {"code": "rate_limited"}), 1)
        finally:
            tx.stop()


class Configuration(unittest.TestCase):
    def run_bad(self, *argv):
        r = subprocess.run([ARGS.transceiver, "--check-config", *argv], capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        return r.stderr

    def test_bad_realtime_keys_name_the_key(self):
        self.assertIn("realtime.key_secrets", self.run_bad("--realtime-key-secrets", "nocolon"))
        self.assertIn("realtime.key_secrets", self.run_bad("--realtime-key-secrets", "k:short"))
        self.assertIn("realtime.key_secrets", self.run_bad("--realtime-key-secrets", "bad id!:" + "s" * 40))
        self.assertIn("realtime.key_file", self.run_bad("--realtime-key-file", "/nonexistent/keys"))
        self.assertIn("realtime.key_lifetime", self.run_bad("--realtime-key-lifetime", "5s"))
        with tempfile.NamedTemporaryFile("w", suffix=".keys") as f:
            f.write("# fleet secrets\n\nnew:" + "n" * 40 + "\nold\n")
            f.flush()
            stderr = self.run_bad("--realtime-key-file", f.name)
            self.assertIn("line 4", stderr)

    def test_good_key_file_is_accepted_and_redacted(self):
        with tempfile.NamedTemporaryFile("w", suffix=".keys") as f:
            f.write("# fleet secrets\nnew:" + "n" * 40 + "\nold:" + "o" * 40 + "\n")
            f.flush()
            r = subprocess.run([ARGS.transceiver, "--check-config", "--realtime-key-file", f.name,
                                "--realtime-key-secrets", SECRET], capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("a" * 40, r.stdout)
        self.assertIn("key_lifetime", r.stdout)


if __name__ == "__main__":
    unittest_main(globals(), "--transceiver")
