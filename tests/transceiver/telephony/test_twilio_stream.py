#!/usr/bin/python3
"""Twilio Media Streams at rtcedge-transceiver (issue 29), black box on loopback: a scripted
Twilio (twilio_provider.py) signs and posts the voice webhook, reads the TwiML, opens the
<Stream> WebSocket and speaks Twilio's messages (connected, start, media every 20 ms, dtmf,
mark, stop), and plays what comes back the way Twilio does (a real-time playout buffer: marks
echoed once the audio before them has played, at once after a clear).

    ProviderSelfCheck  the scripted provider itself, no transceiver: Twilio's documented
                       signature examples, TwiML parsing, the tone analysis, and the playout
                       model against a scripted server (marks after playout, at once on clear)
    EchoBackend        the embedded echo: a 1 kHz tone comes back ≥ 0.35 s later, holding the
                       tone; a mark follows the echoed segment's last media, the provider's echo
                       of it is counted (marks_played); stop ends the call (provider_stopped)
    RtcedgeDialect     tests/transceiver/backend/test_backend_server.py --dialect rtcedge: the
                       webhook's query as <Parameter>s and in session.started's metadata with
                       twilio.*; DTMF reaches the backend; an echoed mark reaches the backend;
                       barge-in: DTMF "#" → the backend's clear → Twilio's clear within 2 media;
                       a later talkspurt's echo comes back with none of the dropped echo before it
    RealtimeDialect    the same server --dialect realtime: the tone through 8k→24k→8k; the socket
                       closed without stop ends the call (stream_closed)
    Webhook            403 unsigned / wrong signature / tampered, 400 without CallSid, a retry
                       before the stream gets the same url, stream upgrades 404 unknown call, 403
                       wrong token, 404 reused token (the call no longer waits), a replayed webhook after the stream 403, a start
                       naming another CallSid closes 1008; every outcome counted
    Hostile            refused messages counted by reason while the stream stays usable; 1009
                       over 16 KiB, 1003 for binary, 1008 for a flood past the rate limit; the
                       service lives on
    Capacity           one worker, one session: the second call is <Reject reason="busy"/>; the
                       Realtime hangup of the first closes its stream 1000 (deleted)

Run: test_twilio_stream.py --transceiver <rtcedge-transceiver> --backend-server
<tests/transceiver/backend/test_backend_server.py> [unittest arguments]. Every wait has a
deadline; every process is stopped even when a case fails (class cleanups)."""

import asyncio
import base64
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import websockets  # python3-websockets (Debian 12: 10.4)

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support", "py"))
sys.path.insert(0, HERE)
from rtcetest.core import free_port, tail, unittest_main, wait_for  # noqa: E402
from rtcetest.transceiver import TransceiverProcess  # noqa: E402
from prom_metrics import metric  # noqa: E402
import twilio_provider as tp  # noqa: E402

ARGS = None
AUTH_TOKEN = "twilio-test-auth-token-0123456789abcdef"
TONE_HZ = 1000
MARKER_HZ = 500          # a second talkspurt told apart from the first
OTHER_HZ = (500, 1500, 2300)
WEBHOOKS = "rtcedge_transceiver_telephony_webhooks_total"
STREAMS = "rtcedge_transceiver_telephony_streams_total"
REFUSED = "rtcedge_transceiver_telephony_messages_refused_total"
WEBHOOK_OUTCOMES = ("answered", "retried", "busy", "no_signature", "bad_signature", "replayed", "bad_request")
STREAM_OUTCOMES = ("opened", "bad_token", "unknown_call")
REFUSAL_REASONS = ("not_json", "not_an_event", "unknown_event", "before_start", "repeated_start", "bad_start",
                   "stream_mismatch", "bad_media", "bad_payload_size", "bad_dtmf", "bad_mark")


# --------------------------------------------------------------------------- processes

class Transceiver(TransceiverProcess):
    """The transceiver with the Twilio endpoints on (the auth token in a file, with the
    trailing newline an editor leaves). public_url=True also passes
    --telephony-public-url http://127.0.0.1:<port>, so the port is picked before the
    start; otherwise the service takes its base URL from the Host header."""

    def __init__(self, *extra, workers=1, public_url=False):
        self.proc = None
        self.log = None
        self.public_url = None
        with tempfile.NamedTemporaryFile("w", prefix="rtce-twilio-token-", delete=False) as f:
            f.write(AUTH_TOKEN + "\n")
            self.token_file = f.name
        argv = ["--media-base-port", "0", "--telephony-twilio-auth-token-file", self.token_file, *extra]
        try:
            if not public_url:
                super().__init__(ARGS.transceiver, argv, workers=workers, log_prefix="rtce-twilio-")
                return
            # TransceiverProcess picks its port as it starts; the public URL must name it first.
            self.http_port = free_port()
            self.public_url = "http://127.0.0.1:%d" % self.http_port
            self.log = tempfile.NamedTemporaryFile(prefix="rtce-twilio-", suffix=".log", delete=False)
            cmd = [ARGS.transceiver, "--http-listen", "127.0.0.1:%d" % self.http_port, "--workers", str(workers),
                   *argv, "--telephony-public-url", self.public_url]
            self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT)
            wait_for(self.ready, 15, "transceiver /healthz")
        except BaseException:
            self.stop()
            raise

    def stop(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=10)
        if self.log is not None:
            self.log.close()
            if os.path.exists(self.log.name):
                os.unlink(self.log.name)
        if os.path.exists(self.token_file):
            os.unlink(self.token_file)

    def log_tail(self, lines=40):
        return tail(self.log.name, lines) if self.log is not None else "(no log)"

    def snapshot(self, call):
        """GET /v1/sessions/<session id> of a call (the call id without rtc_): its JSON."""
        status, _, body = self.request("GET", "/v1/sessions/" + call.session_id)
        if status != 200:
            raise AssertionError("GET /v1/sessions/%s: %d %s" % (call.session_id, status, body[:300]))
        return json.loads(body)

    def telephony_counters(self):
        """{(metric, label value): count} of the Twilio webhook, stream and refusal counters."""
        text = self.metrics_text()
        out = {}
        for name, label, values in ((WEBHOOKS, "outcome", WEBHOOK_OUTCOMES), (STREAMS, "outcome", STREAM_OUTCOMES),
                                    (REFUSED, "reason", REFUSAL_REASONS)):
            for value in values:
                out[(name, value)] = metric(text, name, {"provider": "twilio", label: value}) or 0
        return out


class BackendServer:
    """tests/transceiver/backend/test_backend_server.py --dialect D on a loopback port; its URL
    from the "listening on ws://127.0.0.1:<port>/" line it prints first."""

    def __init__(self, script, dialect, timeout=10):
        self.log = tempfile.NamedTemporaryFile(prefix="rtce-twilio-backend-", suffix=".log", delete=False)
        self.proc = subprocess.Popen([sys.executable, script, "--dialect", dialect], stdout=subprocess.PIPE,
                                     stderr=self.log, text=True)
        try:
            deadline = time.monotonic() + timeout
            line = ""
            while not line:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError("the backend server printed no listening line in %ss" % timeout)
                readable, _, _ = select.select([self.proc.stdout], [], [], remaining)
                if readable:
                    line = self.proc.stdout.readline()
                    if not line:
                        raise AssertionError("the backend server exited: %s" % tail(self.log.name))
            m = re.match(r"listening on (ws://127\.0\.0\.1:\d+/)", line)
            if not m:
                raise AssertionError("unexpected first line from the backend server: %r" % line)
            self.url = m.group(1)
        except BaseException:
            self.stop()
            raise

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        self.proc.stdout.close()
        self.log.close()
        if os.path.exists(self.log.name):
            os.unlink(self.log.name)


# --------------------------------------------------------------------------- helpers

def heard(snapshot, what, **fields):
    """The first logged backend event {"type":"event","heard":what, **fields}, or None."""
    for event in snapshot.get("events", []):
        if event.get("type") == "event" and event.get("heard") == what and \
                all(event.get(k) == v for k, v in fields.items()):
            return event
    return None


def flip_last(text, alphabet="01"):
    """`text` with its last character changed (to one of `alphabet`)."""
    return text[:-1] + (alphabet[0] if text[-1] != alphabet[0] else alphabet[1])


def marks_after_audio(stream):
    """The marks received after the last non-silent media (the service may or may not send
    silence between talkspurts; a talkspurt's mark follows its last audio either way)."""
    audible = stream.audible()
    return [m for m in stream.marks() if audible and m.index > audible[-1].index]


def audible_pcm(stream, since=0):
    return b"".join(r.pcm() for r in stream.audible(since))


class TwilioCase(unittest.TestCase):
    """A transceiver (and backend server) for the class; each case runs one asyncio scenario
    with a deadline; the streams it opened are shut down whatever happens; a failure carries
    the tail of the transceiver's log."""

    BACKEND = None       # None: the embedded echo; or the test server's dialect
    EXTRA = ()
    WORKERS = 1
    PUBLIC_URL = False
    SCENARIO_TIMEOUT = 30

    @classmethod
    def setUpClass(cls):
        argv = list(cls.EXTRA)
        cls.backend = None
        if cls.BACKEND:
            cls.backend = BackendServer(ARGS.backend_server, cls.BACKEND)
            cls.addClassCleanup(cls.backend.stop)
            argv += ["--backend-url", cls.backend.url, "--backend-dialect", cls.BACKEND]
        cls.tx = Transceiver(*argv, workers=cls.WORKERS, public_url=cls.PUBLIC_URL)
        cls.addClassCleanup(cls.tx.stop)
        cls.provider = tp.TwilioProvider(cls.tx.http_port, AUTH_TOKEN, public_url=cls.tx.public_url)

    def run_scenario(self, scenario, timeout=None):
        self._streams = []

        async def main():
            try:
                await asyncio.wait_for(scenario(), timeout or self.SCENARIO_TIMEOUT)
            finally:
                for s in self._streams:
                    await s.shutdown()
        try:
            asyncio.run(main())
        except Exception as e:
            if isinstance(e, asyncio.TimeoutError):
                e = AssertionError("the scenario ran past its %ss deadline" % (timeout or self.SCENARIO_TIMEOUT))
            raise AssertionError("%s\n--- transceiver log (tail) ---\n%s" % (e, self.tx.log_tail())) from e

    # ---- calls and streams

    def stream_for(self, call, **kwargs):
        stream = self.provider.stream(call, **kwargs)
        self._streams.append(stream)
        return stream

    async def open_call(self, query=None):
        """An answered call whose stream is open and started (connected, start)."""
        call = await self.provider.answer_async(query)
        stream = self.stream_for(call)
        await stream.begin()
        return call, stream

    async def snapshot(self, call):
        return await asyncio.to_thread(self.tx.snapshot, call)

    async def eventually(self, fetch, check, timeout, what, interval=0.05, describe=None):
        """fetch() (run in a thread) until check(value) holds: the value; AssertionError with the
        last value (or describe(value)) after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            value = await asyncio.to_thread(fetch)
            if check(value):
                return value
            if time.monotonic() >= deadline:
                if describe:
                    shown = describe(value)
                else:
                    try:
                        shown = json.dumps(value, default=str)
                    except (TypeError, ValueError):
                        shown = repr(value)
                raise AssertionError("timed out after %ss waiting for %s; last: %s" % (timeout, what, shown[:3000]))
            await asyncio.sleep(interval)  # poll interval of a deadline-bounded wait

    async def session_until(self, call, check, timeout, what):
        return await self.eventually(lambda: self.tx.snapshot(call), check, timeout, what)

    async def ended(self, call, timeout=5):
        return await self.session_until(call, lambda s: s.get("state") == "ended", timeout, "the session to end")

    async def counters_until(self, before, expected, timeout=5, what="the telephony counters"):
        """Waits until every counter's change since `before` equals `expected` (absent: 0)."""
        def changes(now):
            return {k: now[k] - before[k] for k in now if now[k] != before[k]}
        want = {k: v for k, v in expected.items() if v}
        now = await self.eventually(self.tx.telephony_counters, lambda now: changes(now) == want, timeout, what,
                                    describe=lambda now: "changes %s, expected %s" % (changes(now), want))
        self.assertEqual(changes(now), want)

    @staticmethod
    def dominant(media, freq, other=None):
        """The media messages whose audio is dominated by `freq` (over `other`: the other of
        TONE_HZ and MARKER_HZ)."""
        other = other or (MARKER_HZ if freq == TONE_HZ else TONE_HZ)
        return [r for r in media if tp.goertzel_power(r.pcm(), freq) > tp.goertzel_power(r.pcm(), other)]

    def assert_tone(self, pcm, what):
        self.assertGreater(len(pcm), 0, what + ": no audio")
        margin = tp.tone_margin_db(pcm, TONE_HZ, OTHER_HZ)
        self.assertGreaterEqual(margin, 10.0, "%s: %d Hz leads %s Hz by only %.1f dB" % (what, TONE_HZ, OTHER_HZ, margin))


# --------------------------------------------------------------------------- the provider itself

class ProviderSelfCheck(unittest.TestCase):
    """The scripted provider, without a transceiver."""

    def test_signature_matches_twilios_documented_examples(self):
        url = "https://mycompany.com/myapp.php?foo=1&bar=2"
        # Twilio's worked example (auth token 12345); the docs printed it with two callers.
        for caller, expected in (("+14158675310", "GvWf1cFY/Q7PnoempGyD5oXAezc="),
                                 ("+12349013030", "0/KCTR6DLpKmkAf8muzZqo1nDgQ=")):
            params = {"CallSid": "CA1234567890ABCDE", "Caller": caller, "Digits": "1234", "From": caller,
                      "To": "+18005551212"}
            self.assertEqual(tp.twilio_signature("12345", url, params), expected)
            reordered = dict(reversed(list(params.items())))
            self.assertEqual(tp.twilio_signature("12345", url, reordered), expected, "fields are sorted by name")
            self.assertNotEqual(tp.twilio_signature("12345", url.replace("foo=1", "foo=2"), params), expected)
            self.assertNotEqual(tp.twilio_signature("12346", url, params), expected)

    def test_twiml_parsing(self):
        t = tp.TwiML('<?xml version="1.0" encoding="UTF-8"?><Response><Connect><Stream url="ws://h:1/s">'
                     '<Parameter name="agent" value="sales"/><Parameter name="lang" value="en"/>'
                     '</Stream></Connect></Response>')
        self.assertEqual((t.kind, t.stream_url, t.parameters), ("stream", "ws://h:1/s", {"agent": "sales", "lang": "en"}))
        r = tp.TwiML('<?xml version="1.0" encoding="UTF-8"?><Response><Reject reason="busy"/></Response>')
        self.assertEqual((r.kind, r.reject_reason), ("reject", "busy"))

    def test_tone_analysis(self):
        tone = b"".join(tp.pcm_from_ulaw(f) for f in tp.tone_frames(TONE_HZ, 0.5))
        self.assertGreater(tp.tone_margin_db(tone, TONE_HZ, OTHER_HZ), 30)
        other = b"".join(tp.pcm_from_ulaw(f) for f in tp.tone_frames(1500, 0.5))
        self.assertLess(tp.tone_margin_db(other, TONE_HZ, OTHER_HZ), -10)
        self.assertEqual(tp.rms(tp.pcm_from_ulaw(tp.ULAW_SILENCE)), 0)
        self.assertTrue(all(len(f) == 160 for f in tp.tone_frames(TONE_HZ, 0.51)))

    def test_playout_model_echoes_marks_after_playout_and_at_once_on_clear(self):
        """A scripted server: 10 media then mark "a" (echoed only after ~200 ms of playout);
        50 media, mark "b", clear (echoed at once, 1 s of audio dropped)."""
        async def scenario():
            echoes = asyncio.Queue()

            async def server(ws, _path=None):
                async def read():
                    async for raw in ws:
                        message = json.loads(raw)
                        if message.get("event") == "mark":
                            await echoes.put((time.monotonic(), message["mark"]["name"]))
                reader = asyncio.create_task(read())
                media = {"event": "media", "streamSid": "MZ0", "media": {"payload": base64.b64encode(tp.ULAW_SILENCE).decode()}}
                for _ in range(10):
                    await ws.send(json.dumps(media))
                await ws.send(json.dumps({"event": "mark", "streamSid": "MZ0", "mark": {"name": "a"}}))
                sent_a = time.monotonic()
                at_a, name_a = await asyncio.wait_for(echoes.get(), 3)
                for _ in range(50):
                    await ws.send(json.dumps(media))
                await ws.send(json.dumps({"event": "mark", "streamSid": "MZ0", "mark": {"name": "b"}}))
                await ws.send(json.dumps({"event": "clear", "streamSid": "MZ0"}))
                sent_clear = time.monotonic()
                at_b, name_b = await asyncio.wait_for(echoes.get(), 3)
                results.update(a=(name_a, at_a - sent_a), b=(name_b, at_b - sent_clear))
                await ws.close(1000)
                reader.cancel()

            results = {}
            async with websockets.serve(server, "127.0.0.1", 0) as srv:
                port = srv.sockets[0].getsockname()[1]
                stream = tp.TwilioStream("ws://127.0.0.1:%d/" % port, tp.twilio_sid("CA"), tp.twilio_sid("AC"))
                try:
                    await stream.open()
                    self.assertEqual(await stream.wait_closed(10), 1000)
                finally:
                    await stream.shutdown()
            self.assertEqual(len(stream.media()), 60)
            self.assertEqual(len(stream.media()[0].payload()), 160)
            name_a, delay_a = results["a"]
            self.assertEqual(name_a, "a")
            self.assertGreaterEqual(delay_a, 0.18, "mark a echoed before its 10 media played")
            name_b, delay_b = results["b"]
            self.assertEqual(name_b, "b")
            self.assertLess(delay_b, 0.5, "mark b was not echoed at once on clear")
            self.assertGreaterEqual(stream.frames_dropped_by_clear, 40)
            self.assertEqual(stream.echoed_names(), ["a", "b"])
        asyncio.run(asyncio.wait_for(scenario(), 20))


# --------------------------------------------------------------------------- the embedded echo

class EchoBackend(TwilioCase):
    """Embedded loopback echo (--backend-echo-delay 500ms, the default)."""

    def test_tone_is_echoed_with_a_mark_and_stop_ends_the_call(self):
        self.run_scenario(self._tone_echo)

    async def _tone_echo(self):
        call, stream = await self.open_call()
        snap = await self.session_until(call, lambda s: s.get("state") == "connected", 5, "the call to connect")
        self.assertEqual(snap.get("transport"), "twilio", snap)
        self.assertEqual(snap["telephony"]["stream_sid"], stream.stream_sid)
        self.assertEqual(snap["telephony"]["call_sid"], call.call_sid)

        frames = tp.tone_frames(TONE_HZ, 1.5)          # 75 media, paced 20 ms
        await stream.send_audio(frames)
        await stream.wait_until(lambda: len(stream.audible()) >= 60, 5, "60 media of the echoed tone")
        latency = stream.audible()[0].at - stream.first_media_sent_at
        self.assertGreaterEqual(latency, 0.35, "the echo came back before the 500 ms echo delay")
        self.assert_tone(audible_pcm(stream), "the echo")

        # The service marks the end of the echoed talkspurt; the provider echoes the mark once
        # the segment has played, and the service counts it.
        mark = (await stream.wait_until(lambda: marks_after_audio(stream), 5, "a mark after the echoed segment"))[0]
        name = mark.mark_name()
        self.assertIsInstance(name, str)
        await stream.wait_until(lambda: name in stream.echoed_names(), 5, "the provider's echo of mark %r" % name)
        snap = await self.session_until(call, lambda s: s["telephony"].get("marks_played", 0) >= 1, 5,
                                        "marks_played >= 1")
        self.assertGreaterEqual(snap["telephony"]["marks_sent"], 1)

        await stream.send_stop()
        self.assertEqual(await stream.wait_closed(5), 1000)
        media = stream.media()
        self.assertTrue(marks_after_audio(stream), "no mark after the echo's last media: %s" % stream.summary())
        snap = await self.ended(call)
        self.assertEqual(snap.get("end_reason"), "provider_stopped")
        self.assertAlmostEqual(snap["telephony"]["media_in"], len(frames), delta=1)
        self.assertEqual(snap["telephony"]["media_out"], len(media))


# --------------------------------------------------------------------------- the test backend

class RtcedgeDialect(TwilioCase):
    """test_backend_server.py --dialect rtcedge: echoes PCM, answers session.started, DTMF and
    marks with "heard" events, and DTMF "#" with a clear."""

    BACKEND = "rtcedge"

    def test_parameters_dtmf_marks_and_barge_in(self):
        self.run_scenario(self._scenario)

    async def _scenario(self):
        query = {"agent": "sales", "lang": "en"}
        call, stream = await self.open_call(query)
        self.assertEqual(call.twiml.parameters, query)

        snap = await self.session_until(call, lambda s: heard(s, "session.started"), 5,
                                        "the backend to hear session.started")
        metadata = heard(snap, "session.started").get("metadata", {})
        for key, value in (("agent", "sales"), ("lang", "en"), ("twilio.call_sid", call.call_sid),
                           ("twilio.stream_sid", stream.stream_sid), ("twilio.from", call.fields["From"]),
                           ("twilio.to", call.fields["To"])):
            self.assertEqual(metadata.get(key), value, "metadata %s: %s" % (key, metadata))

        await stream.send_dtmf("5")
        snap = await self.session_until(call, lambda s: heard(s, "dtmf", digit="5"), 5, "the backend to hear DTMF 5")
        self.assertEqual(snap["telephony"]["dtmf"], 1)

        # A talkspurt: its echo ends with a mark; once played, the provider's echo of it
        # reaches the backend as telephony.mark.
        await stream.send_audio(tp.tone_frames(TONE_HZ, 0.4))
        await stream.wait_until(lambda: len(stream.audible()) >= 15, 5, "the echoed talkspurt")

        name = (await stream.wait_until(lambda: marks_after_audio(stream), 5, "a mark after the talkspurt"))[0].mark_name()
        await stream.wait_until(lambda: name in stream.echoed_names(), 5, "the provider's echo of %r" % name)
        await self.session_until(call, lambda s: heard(s, "mark", name=name), 5, "the backend to hear mark %r" % name)

        # Barge-in: 2 s of tone as one burst (100 media: exactly the documented burst, so the
        # mirrored bucket must be full first); ~10 media of its echo play, then "#": the
        # backend clears, the service tells Twilio to clear.
        await stream.until_bucket_holds(100)
        since = len(stream.received)
        await stream.send_audio(tp.tone_frames(TONE_HZ, 2.0), interval=None)
        await stream.wait_until(lambda: len(stream.media(since)) >= 10, 5, "10 media of the burst's echo")
        at_hash = len(stream.received)
        await stream.send_dtmf("#")
        clear = (await stream.wait_until(lambda: stream.of("clear", at_hash), 3, "clear after DTMF #"))[0]
        self.assertEqual(clear.message.get("streamSid"), stream.stream_sid)
        late = [r for r in stream.received[at_hash:clear.index] if r.event == "media"]
        self.assertLessEqual(len(late), 2, "media between # and clear: %d" % len(late))

        # The burst's echo still queued (~90 media) must be gone: a short 500 Hz talkspurt sent
        # now comes back, and nothing of the 1 kHz echo may come before (or after) it.
        await stream.until_bucket_holds(12)
        await stream.send_audio(tp.tone_frames(MARKER_HZ, 0.2))
        await stream.wait_until(lambda: len(self.dominant(stream.audible(clear.index), MARKER_HZ)) >= 5, 5,
                                "the echo of a 500 Hz talkspurt after the clear")
        await stream.send_stop()
        self.assertEqual(await stream.wait_closed(5), 1000)
        leftover = self.dominant(stream.audible(clear.index), TONE_HZ)
        self.assertEqual(leftover, [], "1 kHz media after the clear: the queued echo was not dropped")
        self.assertLess(len(self.dominant(stream.audible(since), TONE_HZ)), 50,
                        "most of the burst's echo should have been dropped")
        snap = await self.ended(call)
        self.assertEqual(snap.get("end_reason"), "provider_stopped")
        self.assertEqual(snap["telephony"]["dtmf"], 2)
        self.assertGreaterEqual(snap["telephony"]["clears"], 1)


class RealtimeDialect(TwilioCase):
    """test_backend_server.py --dialect realtime: appends echoed as output audio deltas (24 kHz)."""

    BACKEND = "realtime"

    def test_tone_round_trip_and_close_without_stop(self):
        self.run_scenario(self._scenario)

    async def _scenario(self):
        call, stream = await self.open_call()
        # A Realtime backend makes the phone call a Realtime call: an app server's sideband
        # attaches by the call id and hears the caller's DTMF (the Realtime protocol has none).
        sideband = await websockets.connect(
            "ws://127.0.0.1:%d/v1/realtime?call_id=%s" % (self.tx.http_port, call.call_id), open_timeout=5)
        try:
            created = json.loads(await asyncio.wait_for(sideband.recv(), 5))
            self.assertEqual(created.get("type"), "session.created", created)
            await stream.send_audio(tp.tone_frames(TONE_HZ, 1.0))      # 50 media
            await stream.wait_until(lambda: len(stream.audible()) >= 35, 5, "35 media of the tone back")
            self.assert_tone(audible_pcm(stream), "the tone through the realtime dialect")
            await stream.send_dtmf("7")
            dtmf = await self.sideband_event(sideband, "rtcedge.telephony.dtmf")
            self.assertEqual(dtmf.get("digit"), "7", dtmf)
            self.assertEqual(await stream.close(), 1000)
            ended = await self.sideband_event(sideband, "rtcedge.call.ended")
            self.assertEqual(ended.get("reason"), "stream_closed", ended)
            await asyncio.wait_for(sideband.wait_closed(), 5)
            self.assertEqual(sideband.close_code, 1000)
        finally:
            await sideband.close()
        snap = await self.ended(call)
        self.assertEqual(snap.get("end_reason"), "stream_closed")

    async def sideband_event(self, sideband, kind, timeout=5):
        """The next event of type `kind` on the sideband (others, like output_audio_buffer.*, skipped)."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                self.fail("no %s on the sideband within %ss" % (kind, timeout))
            event = json.loads(await asyncio.wait_for(sideband.recv(), left))
            if event.get("type") == kind:
                return event


# --------------------------------------------------------------------------- webhook and stream admission

class Webhook(TwilioCase):
    """Signed webhooks against --telephony-public-url; tokens; replays."""

    PUBLIC_URL = True

    def test_1_refusals(self):
        self.run_scenario(self._refusals)

    async def _refusals(self):
        before = await asyncio.to_thread(self.tx.telephony_counters)
        p = self.provider
        query = {"agent": "support"}

        a = await p.post_webhook_async(p.call_fields(), query, signature=None)
        self.assertEqual(a.status, 403, a)
        wrong = tp.twilio_signature("not-the-auth-token", p.webhook_url(query), p.call_fields())
        a = await p.post_webhook_async(p.call_fields(), query, signature=wrong)
        self.assertEqual(a.status, 403, a)
        fields = p.call_fields()
        a = await p.post_webhook_async(fields, query, sign_url=p.webhook_url())   # signed without the query
        self.assertEqual(a.status, 403, a)
        tampered = dict(fields, To="+19005550123")
        a = await p.post_webhook_async(tampered, query,
                                       signature=tp.twilio_signature(AUTH_TOKEN, p.webhook_url(query), fields))
        self.assertEqual(a.status, 403, a)
        no_sid = p.call_fields()
        del no_sid["CallSid"]
        a = await p.post_webhook_async(no_sid, query)
        self.assertEqual(a.status, 400, a)

        await self.counters_until(before, {(WEBHOOKS, "no_signature"): 1, (WEBHOOKS, "bad_signature"): 3,
                                           (WEBHOOKS, "bad_request"): 1})

    def test_2_retry_tokens_and_replay(self):
        self.run_scenario(self._retry_tokens_and_replay)

    async def _retry_tokens_and_replay(self):
        before = await asyncio.to_thread(self.tx.telephony_counters)
        p = self.provider
        query = {"agent": "support", "queue": "a b&c"}
        call = await p.answer_async(query)
        self.assertEqual(call.answer.headers.get("content-type", "").split(";")[0], "text/xml")
        self.assertTrue(call.answer.body.lstrip().startswith("<?xml"), call.answer.body[:100])
        self.assertEqual(call.twiml.parameters, query)
        self.assertTrue(call.stream_url.startswith("ws://127.0.0.1:%d/" % self.tx.http_port), call.stream_url)

        retry = await p.post_webhook_async(call.fields, query)      # Twilio retrying the same request
        self.assertEqual(retry.status, 200, retry)
        self.assertEqual(retry.twiml.stream_url, call.stream_url)
        self.assertEqual(retry.twiml.parameters, query)

        for url, status, what in ((call.stream_url_with(call_id="rtc_" + flip_last(call.session_id)), 404, "unknown call"),
                                  (call.stream_url_with(token=flip_last(call.token)), 403, "wrong token")):
            with self.assertRaises(websockets.InvalidStatusCode, msg=what) as refused:
                await self.stream_for(call, url=url).open()
            self.assertEqual(refused.exception.status_code, status, what)

        stream = self.stream_for(call)
        await stream.begin()
        # One use: the call no longer waits for a stream, so its id is unknown to the endpoint.
        with self.assertRaises(websockets.InvalidStatusCode, msg="a used token") as refused:
            await self.stream_for(call).open()
        self.assertEqual(refused.exception.status_code, 404)
        await self.session_until(call, lambda s: s.get("state") == "connected", 5, "the call to connect")

        replay = await p.post_webhook_async(call.fields, query)     # the same CallSid after its stream
        self.assertEqual(replay.status, 403, replay)

        self.assertFalse(stream.is_closed, "the refused upgrades and the replay touched the live stream")
        await stream.send_stop()
        self.assertEqual(await stream.wait_closed(5), 1000)
        await self.counters_until(before, {(WEBHOOKS, "answered"): 1, (WEBHOOKS, "retried"): 1,
                                           (WEBHOOKS, "replayed"): 1, (STREAMS, "opened"): 1,
                                           (STREAMS, "bad_token"): 1, (STREAMS, "unknown_call"): 2})

    def test_3_start_with_another_call_sid_closes_1008(self):
        self.run_scenario(self._start_mismatch)

    async def _start_mismatch(self):
        call = await self.provider.answer_async()
        stream = self.stream_for(call)
        await stream.open()
        await stream.send_connected()
        await stream.send_start(call_sid=tp.twilio_sid("CA"))
        self.assertEqual(await stream.wait_closed(5), 1008)


# --------------------------------------------------------------------------- hostile streams

class Hostile(TwilioCase):
    EXTRA = ("--backend-echo-delay", "100ms")

    def test_1_refused_messages_are_counted_and_the_stream_stays_usable(self):
        self.run_scenario(self._refused_messages)

    async def _refused_messages(self):
        before = await asyncio.to_thread(self.tx.telephony_counters)
        call = await self.provider.answer_async()
        stream = self.stream_for(call)
        await stream.open()
        await stream.send_connected()
        sid = stream.stream_sid
        await stream.send_raw('{"event": "media", ')                                  # not_json
        await stream.send_raw("[1, 2, 3]")                                            # not_an_event
        await stream.send_json({"event": "hangup", "streamSid": sid})                 # unknown_event
        await stream.send_json(stream.media_message(tp.ULAW_SILENCE))                 # before_start
        await stream.send_json({"event": "start", "sequenceNumber": "1", "streamSid": sid,
                                "start": "not an object"})                            # bad_start
        await stream.send_start()
        await stream.send_start()                                                     # repeated_start
        await stream.send_json(stream.media_message("@@not base64@@"))                # bad_media
        await stream.send_json(stream.media_message(tp.ULAW_SILENCE, stream_sid=tp.twilio_sid("MZ")))  # stream_mismatch
        await stream.send_json(stream.media_message(b"\xff" * 100))                   # bad_payload_size
        await stream.send_json(stream.media_message(b"\xff" * 2000))                  # bad_payload_size
        await stream.send_dtmf("x")                                                   # bad_dtmf
        await stream.send_json({"event": "mark", "streamSid": sid, "sequenceNumber": "99", "mark": {}})  # bad_mark
        expected = {(REFUSED, r): 1 for r in REFUSAL_REASONS}
        expected[(REFUSED, "bad_payload_size")] = 2
        expected.update({(WEBHOOKS, "answered"): 1, (STREAMS, "opened"): 1})
        await self.counters_until(before, expected)
        self.assertFalse(stream.is_closed, stream.summary())

        frames = tp.tone_frames(TONE_HZ, 0.5)
        await stream.send_audio(frames)
        await stream.wait_until(lambda: len(stream.audible()) >= 10, 5, "the echo of valid media after the refusals")
        snap = await self.snapshot(call)
        self.assertEqual(snap["telephony"]["media_in"], len(frames), "refused media counted as media_in")

        await stream.send_json(stream.media_message("A" * (20 * 1024)))                # over 16 KiB
        self.assertEqual(await stream.wait_closed(5), 1009)

    def test_2_binary_message_closes_1003(self):
        async def scenario():
            _, stream = await self.open_call()
            await stream.send_raw(tp.ULAW_SILENCE)
            self.assertEqual(await stream.wait_closed(5), 1003)
        self.run_scenario(scenario)

    def test_3_flood_closes_1008_and_the_service_lives(self):
        async def scenario():
            _, stream = await self.open_call()
            sent = 0
            try:
                for _ in range(600):
                    await stream.send_media(tp.ULAW_SILENCE)
                    sent += 1
            except websockets.ConnectionClosed:
                pass
            self.assertEqual(await stream.wait_closed(5), 1008)
            self.assertGreater(sent, 100, "closed within the documented burst of 100")
        self.run_scenario(scenario)
        self.assertTrue(self.tx.alive())
        self.assertEqual(self.tx.request("GET", "/healthz")[0], 200)


# --------------------------------------------------------------------------- capacity and hangup

class Capacity(TwilioCase):
    WORKERS = 1
    EXTRA = ("--sessions-max-per-worker", "1")

    def test_second_call_is_rejected_busy_and_hangup_ends_the_first(self):
        self.run_scenario(self._scenario)

    async def _scenario(self):
        p = self.provider
        call, stream = await self.open_call()
        await self.session_until(call, lambda s: s.get("state") == "connected", 5, "the first call to connect")
        before = await asyncio.to_thread(self.tx.telephony_counters)

        busy = await p.post_webhook_async(p.call_fields())
        self.assertEqual(busy.status, 200, busy)
        self.assertIsNotNone(busy.twiml, busy)
        self.assertEqual((busy.twiml.kind, busy.twiml.reject_reason), ("reject", "busy"), busy)
        await self.counters_until(before, {(WEBHOOKS, "busy"): 1})

        status, _, body = await asyncio.to_thread(self.tx.request, "POST", "/v1/realtime/calls/%s/hangup" % call.call_id)
        self.assertTrue(200 <= status < 300, "hangup: %d %s" % (status, body[:300]))
        self.assertEqual(await stream.wait_closed(5), 1000)
        snap = await self.ended(call)
        self.assertEqual(snap.get("end_reason"), "deleted")

        # The slot is free again: a new call is answered (a new CallSid each try).
        answer = await self.eventually(lambda: p.post_webhook(p.call_fields()),
                                       lambda a: a.twiml is not None and a.twiml.kind == "stream", 5,
                                       "a new call to be answered after the hangup", interval=0.1)
        self.assertEqual(answer.status, 200)


class EndsAndDrain(TwilioCase):
    """The backend hanging up ends the phone call; a draining transceiver rejects new calls
    busy and ends the live ones at its drain timeout, closing their streams cleanly."""

    BACKEND = "rtcedge"
    EXTRA = ("--sessions-drain-timeout", "2s")

    def test_1_the_backend_hanging_up_closes_the_stream(self):
        self.run_scenario(self._backend_ends)

    async def _backend_ends(self):
        call, stream = await self.open_call()
        await self.session_until(call, lambda s: s.get("state") == "connected", 5, "the call to connect")
        await stream.send_dtmf("0")     # the test backend answers it with session.end
        self.assertEqual(await stream.wait_closed(5), 1000)
        snap = await self.ended(call)
        self.assertEqual(snap.get("end_reason"), "backend_ended")

    def test_2_drain_rejects_new_calls_and_ends_live_ones(self):
        self.run_scenario(self._drain)

    async def _drain(self):
        p = self.provider
        call, stream = await self.open_call()
        await self.session_until(call, lambda s: s.get("state") == "connected", 5, "the call to connect")
        self.tx.proc.send_signal(signal.SIGTERM)
        await self.eventually(lambda: self.tx.request("GET", "/readyz")[0], lambda status: status == 503, 5,
                              "/readyz to fail while draining")
        busy = await p.post_webhook_async(p.call_fields())
        self.assertEqual((busy.status, busy.twiml.kind if busy.twiml else None), (200, "reject"), busy)
        # The live call goes on until the drain timeout (2 s), then its stream closes cleanly.
        await stream.send_audio(tp.tone_frames(TONE_HZ, 0.5))
        self.assertFalse(stream.is_closed, "the drain cut a live call at once")
        self.assertEqual(await stream.wait_closed(6), 1000)
        self.assertEqual(await asyncio.to_thread(self.tx.proc.wait, 10), 0)


if __name__ == "__main__":
    unittest_main(globals(), "--transceiver", "--backend-server")
