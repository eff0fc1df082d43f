#!/usr/bin/python3
"""Phone calls through Telnyx (issue 29 §2) against a real rtcedge-transceiver, with a scripted
Telnyx (telnyx_provider.py: its TeXML webhook signed with Ed25519, its media-streaming
messages, Twilio's playback model) and tests/transceiver/backend/test_backend_server.py as an
rtcedge-dialect backend.

    Call        the TeXML answer (<Start><Stream bidirectionalMode="rtp" bidirectionalCodec=
                "PCMU"> with the webhook's query as <Parameter>s, <Pause> the configured
                telephony.telnyx.max_call); a tone comes back through the backend; the backend's
                session.started carries telnyx.call_sid and the custom parameters; DTMF reaches
                it; a mark after each segment is played back; stop ends the call
                (provider_stopped); a start naming Telnyx's own call_control_id is accepted
    Webhook     unsigned, wrong key, tampered body, stale timestamp: 403, counted by provider

Run: test_telnyx_stream.py --transceiver <rtcedge-transceiver> --backend-server
<tests/transceiver/backend/test_backend_server.py>. Every wait has a deadline."""

import asyncio
import json
import os
import sys
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support", "py"))
sys.path.insert(0, HERE)
from rtcetest.core import poll_until, unittest_main  # noqa: E402
from rtcetest.transceiver import TransceiverProcess  # noqa: E402
from prom_metrics import metric  # noqa: E402
import telnyx_provider as tx  # noqa: E402
import twilio_provider as tp  # noqa: E402
from test_twilio_stream import BackendServer  # noqa: E402

ARGS = None
WEBHOOKS = "rtcedge_transceiver_telephony_webhooks_total"


class TelnyxCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = BackendServer(ARGS.backend_server, "rtcedge")
        cls.addClassCleanup(cls.backend.stop)
        cls.provider = tx.TelnyxProvider(0)
        cls.tx = TransceiverProcess(ARGS.transceiver, [
            "--media-base-port", "0", "--telephony-telnyx-public-key", cls.provider.public_key_b64,
            "--telephony-telnyx-max-call", "600s", "--backend-url", cls.backend.url], log_prefix="rtce-telnyx-")
        cls.addClassCleanup(cls.tx.stop)
        cls.provider.http_port = cls.tx.http_port

    def outcome(self, name):
        return metric(self.tx.metrics_text(), WEBHOOKS, {"provider": "telnyx", "outcome": name}) or 0

    def snapshot(self, call):
        status, _, body = self.tx.request("GET", "/v1/sessions/" + call.session_id)
        self.assertEqual(status, 200, body)
        return json.loads(body)

    def events_heard(self, call, heard):
        return [e for e in self.snapshot(call).get("events", []) if e.get("heard") == heard]

    def test_call(self):
        call = self.provider.answer({"agent": "support"})
        texml = call.answer.texml
        self.assertEqual((texml.attributes.get("bidirectionalMode"), texml.attributes.get("bidirectionalCodec"),
                          texml.attributes.get("track")), ("rtp", "PCMU", "inbound_track"), texml.text)
        self.assertEqual(texml.parameters, {"agent": "support"})
        self.assertEqual(texml.pause_seconds, 600, texml.text)

        async def run():
            s = await self.provider.stream(call, custom_parameters=texml.parameters).begin()
            try:
                await s.send_audio(tp.tone_frames(1000, 1.0))
                await s.wait_until(lambda: len(s.audible()) >= 35, 5, "35 media of the tone back")
                pcm = b"".join(m.pcm() for m in s.audible())
                self.assertGreaterEqual(tp.tone_margin_db(pcm, 1000, (500, 1500, 2300)), 10)
                await s.send_dtmf("9")
                # The segment's mark: sent after its media, played back by the provider, heard by the backend.
                await s.wait_until(lambda: s.marks(), 5, "a mark after the echoed segment")
                await asyncio.to_thread(poll_until, lambda: self.events_heard(call, "mark"), 5)
                self.assertTrue(self.events_heard(call, "mark"), "the backend heard no mark")
                await s.send_stop()
                self.assertEqual(await s.wait_closed(5), 1000)
            finally:
                await s.shutdown()

        asyncio.run(run())
        started = self.events_heard(call, "session.started")
        self.assertTrue(started, self.snapshot(call))
        metadata = started[0]["metadata"]
        self.assertEqual((metadata.get("agent"), metadata.get("telnyx.call_sid")), ("support", call.call_sid))
        self.assertEqual([e.get("digit") for e in self.events_heard(call, "dtmf")], ["9"])
        snap = self.snapshot(call)
        self.assertEqual((snap["transport"], snap["state"], snap["end_reason"]), ("telnyx", "ended", "provider_stopped"))
        self.assertGreaterEqual(snap["telephony"]["marks_played"], 1, snap)

    def test_webhook_refusals(self):
        before = {o: self.outcome(o) for o in ("no_signature", "bad_signature")}
        p = self.provider
        self.assertEqual(p.post_webhook(p.call_fields(), signature=None).status, 403)
        other = tx.TelnyxProvider(p.http_port)
        fields = p.call_fields()
        ts = str(int(time.time()))
        self.assertEqual(p.post_webhook(fields, signature=other.sign(ts, "CallSid=x"), timestamp=ts).status, 403)
        tampered = p.sign(ts, "CallSid=another")
        self.assertEqual(p.post_webhook(fields, signature=tampered, timestamp=ts).status, 403)
        stale = str(int(time.time()) - 3600)   # a captured request replayed an hour later
        self.assertEqual(p.post_webhook(fields, timestamp=stale).status, 403)
        self.assertEqual(self.outcome("no_signature") - before["no_signature"], 1)
        self.assertEqual(self.outcome("bad_signature") - before["bad_signature"], 3)
        # Twilio's route is off: no auth token configured.
        self.assertEqual(self.tx.request("POST", "/v1/telephony/twilio", "CallSid=x",
                                         {"Content-Type": "application/x-www-form-urlencoded"})[0], 404)


if __name__ == "__main__":
    unittest_main(globals(), "--transceiver", "--backend-server")
