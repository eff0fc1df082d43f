"""A scripted Twilio for black-box tests and benchmarks of rtcedge-transceiver's telephony
endpoints (Python standard library and python3-websockets 10.4 only).

It speaks Twilio's documented messages, as Twilio does:

    webhook   POST <service>/v1/telephony/twilio[?custom params], form-encoded call fields
              (CallSid CA…, AccountSid AC…, From, To, CallStatus, Direction, ApiVersion) and
              X-Twilio-Signature = base64(HMAC-SHA1(auth token, URL + sorted name+value pairs));
              the answer's TwiML parsed (<Connect><Stream url><Parameter/>… or <Reject>)
    stream    a WebSocket to the <Stream> url: connected, start (streamSid MZ…, the call's
              CallSid, audio/x-mulaw 8000 Hz mono, the TwiML's customParameters), media every
              20 ms (160 μ-law bytes, base64), dtmf, mark, stop
    playback  what Twilio does with the service's media: a real-time playout buffer (20 ms a
              media message, the clock starts at the first media, an underrun restarts it at
              the next arrival); each received mark is echoed back once every media received
              before it has played; a received clear drops the buffered media and echoes every
              pending mark at once

Every message the stream receives is kept in order with its arrival time (Received), so a test
can reason about order ("no media between # and clear") and timing. Waits take deadlines;
nothing here sleeps except the 20 ms pacing of sent media and the rate-limit mirror
(until_bucket_holds), both computed. Audio helpers: tone/silence frames in μ-law, decoding,
RMS, and a Goertzel filter for tone checks without numpy.

The same class serves other providers' tests later (their framing differs; the playout model,
the recording and the audio helpers do not)."""

import asyncio
import base64
import collections
import hashlib
import hmac
import http.client
import json
import math
import re
import secrets
import time
import urllib.parse
import warnings
import xml.etree.ElementTree as ET

import websockets  # python3-websockets (Debian 12: 10.4)

with warnings.catch_warnings():
    # audioop is deprecated from 3.11 (removed in 3.13): fine for Debian 12's 3.11.
    warnings.simplefilter("ignore", DeprecationWarning)
    import audioop

RATE = 8000               # Twilio Media Streams: audio/x-mulaw, 8000 Hz, mono
FRAME_S = 0.02            # one media message: 20 ms
FRAME_BYTES = 160         # 20 ms of 8 kHz μ-law
ULAW_SILENCE = b"\xff" * FRAME_BYTES
WEBHOOK_PATH = "/v1/telephony/twilio"
STREAM_PATH = re.compile(r"^/v1/telephony/twilio/stream/(rtc_[0-9a-f]+)/([^/?#]+)$")


# --------------------------------------------------------------------------- identities, signing

def twilio_sid(prefix):
    """A Twilio-shaped SID: a two-letter prefix (CA call, AC account, MZ stream) + 32 hex."""
    return prefix + secrets.token_hex(16)


def twilio_signature(auth_token, url, params):
    """X-Twilio-Signature of a POST: base64(HMAC-SHA1(auth token, the full URL (query
    included) followed by every form field's name and value, sorted by name))."""
    data = url + "".join(name + str(params[name]) for name in sorted(params))
    return base64.b64encode(hmac.new(auth_token.encode(), data.encode(), hashlib.sha1).digest()).decode()


# --------------------------------------------------------------------------- audio

def tone_pcm(freq, seconds, amplitude=8000, rate=RATE):
    """PCM16 (little-endian, mono) of a sine at `freq` Hz."""
    n = int(round(seconds * rate))
    return b"".join(int(round(amplitude * math.sin(2 * math.pi * freq * i / rate))).to_bytes(2, "little", signed=True)
                    for i in range(n))


def ulaw_frames(pcm):
    """PCM16 at 8 kHz as 20 ms μ-law frames (a short last frame is padded with silence)."""
    ulaw = audioop.lin2ulaw(pcm, 2)
    frames = [ulaw[i:i + FRAME_BYTES] for i in range(0, len(ulaw), FRAME_BYTES)]
    if frames and len(frames[-1]) < FRAME_BYTES:
        frames[-1] += ULAW_SILENCE[len(frames[-1]):]
    return frames


def tone_frames(freq, seconds, amplitude=8000):
    return ulaw_frames(tone_pcm(freq, seconds, amplitude))


def silence_frames(seconds):
    return [ULAW_SILENCE] * int(round(seconds / FRAME_S))


def pcm_from_ulaw(ulaw):
    return audioop.ulaw2lin(ulaw, 2)


def rms(pcm):
    return audioop.rms(pcm, 2) if pcm else 0


def samples(pcm):
    return memoryview(pcm).cast("h")


def goertzel_power(pcm, freq, rate=RATE):
    """The power of `freq` in PCM16 `pcm` (Goertzel filter, the whole buffer one block)."""
    coeff = 2 * math.cos(2 * math.pi * freq / rate)
    s1 = s2 = 0.0
    for x in samples(pcm):
        s1, s2 = x + coeff * s1 - s2, s1
    return s1 * s1 + s2 * s2 - coeff * s1 * s2


def tone_margin_db(pcm, freq, others, rate=RATE):
    """How many dB the power at `freq` exceeds the strongest of `others` (inf when they are 0)."""
    target = goertzel_power(pcm, freq, rate)
    strongest = max(goertzel_power(pcm, f, rate) for f in others)
    if strongest <= 0:
        return math.inf
    if target <= 0:
        return -math.inf
    return 10 * math.log10(target / strongest)


# --------------------------------------------------------------------------- TwiML

class TwiML:
    """A parsed answer: kind "stream" (stream_url, parameters {name: value} in order) or
    "reject" (reject_reason), or "other"."""

    def __init__(self, text):
        self.text = text
        self.root = ET.fromstring(text)
        self.kind = "other"
        self.stream_url = None
        self.parameters = {}
        self.reject_reason = None
        if self.root.tag != "Response":
            return
        stream = self.root.find("./Connect/Stream")
        reject = self.root.find("./Reject")
        if stream is not None:
            self.kind = "stream"
            self.stream_url = stream.get("url")
            for p in stream.findall("./Parameter"):
                self.parameters[p.get("name")] = p.get("value")
        elif reject is not None:
            self.kind = "reject"
            self.reject_reason = reject.get("reason")

    def __repr__(self):
        return "TwiML(%r)" % self.text


class WebhookAnswer:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body
        self.twiml = None
        if status == 200 and headers.get("content-type", "").startswith("text/xml"):
            self.twiml = TwiML(body)

    def __repr__(self):
        return "WebhookAnswer(%d, %r, %r)" % (self.status, self.headers.get("content-type"), self.body[:400])


class Call:
    """One answered call: the webhook's fields, its TwiML, and the stream URL's parts
    (call_id rtc_…, session_id = call_id without rtc_, token)."""

    def __init__(self, fields, answer, query=None):
        self.fields = fields
        self.answer = answer
        self.twiml = answer.twiml
        self.query = dict(query or {})
        self.call_sid = fields.get("CallSid")
        self.account_sid = fields.get("AccountSid")
        self.stream_url = self.twiml.stream_url
        path = urllib.parse.urlsplit(self.stream_url).path
        m = STREAM_PATH.match(path)
        if not m:
            raise AssertionError("stream url %r is not /v1/telephony/twilio/stream/<rtc_…>/<token>" % self.stream_url)
        self.call_id, self.token = m.group(1), m.group(2)
        self.session_id = self.call_id[len("rtc_"):]

    def stream_url_with(self, call_id=None, token=None):
        """The stream URL with another call id or token (for refusal tests)."""
        base = self.stream_url[:self.stream_url.index("/v1/telephony/twilio/stream/")]
        return "%s/v1/telephony/twilio/stream/%s/%s" % (base, call_id or self.call_id, token or self.token)


# --------------------------------------------------------------------------- the webhook side

SIGN = object()   # post_webhook(signature=SIGN): sign with the provider's auth token (the default)


class TwilioProvider:
    """The provider's account and its webhooks to one service at 127.0.0.1:`http_port`.
    `public_url` is the base URL configured at the service (telephony.public_url); the
    signature covers public_url + path + query (default: http://127.0.0.1:<port>, what the
    service derives from the Host header)."""

    def __init__(self, http_port, auth_token, public_url=None, host="127.0.0.1", account_sid=None):
        self.http_port = http_port
        self.host = host
        self.auth_token = auth_token
        self.base = (public_url or "http://%s:%d" % (host, http_port)).rstrip("/")
        self.account_sid = account_sid or twilio_sid("AC")

    def webhook_url(self, query=None):
        return self.base + WEBHOOK_PATH + (("?" + urllib.parse.urlencode(query)) if query else "")

    def call_fields(self, call_sid=None, caller="+14155550100", called="+18005550199", **extra):
        """The form fields of an inbound call's voice webhook, as Twilio posts them."""
        fields = {
            "AccountSid": self.account_sid, "ApiVersion": "2010-04-01", "CallSid": call_sid or twilio_sid("CA"),
            "CallStatus": "ringing", "Called": called, "CalledCountry": "US", "Caller": caller,
            "CallerCountry": "US", "Direction": "inbound", "From": caller, "FromCountry": "US",
            "To": called, "ToCountry": "US",
        }
        fields.update(extra)
        return fields

    def post_webhook(self, fields, query=None, signature=SIGN, sign_url=None, timeout=10):
        """POSTs the form; signature=SIGN signs it, None sends no X-Twilio-Signature, a string
        is sent as is. sign_url: sign another URL than the one posted to. WebhookAnswer."""
        body = urllib.parse.urlencode(fields)
        headers = {"Content-Type": "application/x-www-form-urlencoded", "User-Agent": "TwilioProxy/1.1",
                   "Accept": "*/*"}
        if signature is SIGN:
            signature = twilio_signature(self.auth_token, sign_url or self.webhook_url(query), fields)
        if signature is not None:
            headers["X-Twilio-Signature"] = signature
        path = WEBHOOK_PATH + (("?" + urllib.parse.urlencode(query)) if query else "")
        conn = http.client.HTTPConnection(self.host, self.http_port, timeout=timeout)
        try:
            conn.request("POST", path, body=body, headers=headers)
            r = conn.getresponse()
            return WebhookAnswer(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode(errors="replace"))
        finally:
            conn.close()

    def answer(self, query=None, fields=None, **field_overrides):
        """An inbound call the service answers with <Connect><Stream>: Call (AssertionError
        with the answer otherwise)."""
        fields = fields or self.call_fields(**field_overrides)
        answer = self.post_webhook(fields, query)
        if answer.twiml is None or answer.twiml.kind != "stream":
            raise AssertionError("the webhook was not answered with <Connect><Stream>: %r" % answer)
        return Call(fields, answer, query)

    async def answer_async(self, query=None, fields=None, **field_overrides):
        return await asyncio.to_thread(self.answer, query, fields, **field_overrides)

    async def post_webhook_async(self, fields, query=None, signature=SIGN, sign_url=None):
        return await asyncio.to_thread(self.post_webhook, fields, query, signature, sign_url)

    def stream(self, call, url=None, **kwargs):
        """A TwilioStream for an answered call (its CallSid, account and custom parameters), to
        its <Stream> url or to `url` (refusal tests)."""
        return TwilioStream(url or call.stream_url, call.call_sid, self.account_sid, dict(call.twiml.parameters),
                            auth_token=self.auth_token, **kwargs)


# --------------------------------------------------------------------------- the media stream

class Received:
    """One message from the service: its place in the order, arrival time (time.monotonic()),
    the parsed JSON (None when not JSON) and its event name."""

    __slots__ = ("index", "at", "raw", "message", "event", "_pcm")

    def __init__(self, index, at, raw):
        self.index, self.at, self.raw = index, at, raw
        self._pcm = None
        self.message = None
        self.event = None
        if isinstance(raw, str):
            try:
                self.message = json.loads(raw)
            except ValueError:
                pass
            if isinstance(self.message, dict):
                self.event = self.message.get("event")

    def payload(self):
        """The μ-law bytes of a media message (b"" when it has none or they are not base64)."""
        try:
            return base64.b64decode(self.message["media"]["payload"], validate=True)
        except (KeyError, TypeError, ValueError):
            return b""

    def pcm(self):
        """The payload decoded to PCM16 at 8 kHz (cached)."""
        if self._pcm is None:
            self._pcm = pcm_from_ulaw(self.payload())
        return self._pcm

    def mark_name(self):
        try:
            return self.message["mark"]["name"]
        except (KeyError, TypeError):
            return None

    def __repr__(self):
        return "#%d %s" % (self.index, self.event or repr(self.raw)[:60])


class TwilioStream:
    """One Media Streams WebSocket, the provider's side. open() connects (refusals raise
    websockets.InvalidStatusCode, .status_code); send_* send Twilio's messages; every received
    message lands in `received`; the playout model echoes marks (marks_echoed: [(time, name)]).
    Every message sent is mirrored in a token bucket (until_bucket_holds) so a test can stay
    inside the service's documented rate limit on purpose."""

    def __init__(self, url, call_sid, account_sid, custom_parameters=None, stream_sid=None, auth_token=None,
                 bucket_burst=100, bucket_rate=75.0):
        self.url = url
        self.call_sid = call_sid
        self.account_sid = account_sid
        self.custom_parameters = dict(custom_parameters or {})
        self.stream_sid = stream_sid or twilio_sid("MZ")
        self.auth_token = auth_token
        self.ws = None
        self.received = []
        self.marks_echoed = []          # [(time.monotonic(), name)] in the order sent
        self.media_sent = 0
        self.first_media_sent_at = None
        self.last_media_sent_at = None
        self.frames_dropped_by_clear = 0
        self.close_code = None
        self.close_reason = None
        self._seq = 0
        self._chunk = 0
        self._play_end = None            # when the buffered media has played out
        self._pending_marks = collections.deque()   # [due, name]
        self._wake = asyncio.Event()
        self._cond = asyncio.Condition()
        self._closed = asyncio.Event()
        self._receiver = None
        self._player = None
        self._bucket_burst, self._bucket_rate = bucket_burst, bucket_rate
        self._bucket_tokens, self._bucket_at = float(bucket_burst), None

    # ---- connection

    async def open(self, timeout=5, extra_headers=None, sign_upgrade=True):
        """Connects like Twilio (no compression; X-Twilio-Signature over the stream URL when
        the auth token is known) and starts receiving and playing."""
        headers = dict(extra_headers or {})
        if sign_upgrade and self.auth_token:
            headers.setdefault("X-Twilio-Signature", twilio_signature(self.auth_token, self.url, {}))
        self.ws = await websockets.connect(self.url, extra_headers=headers, compression=None, open_timeout=timeout,
                                           close_timeout=3, max_size=1 << 20, ping_interval=None)
        self._receiver = asyncio.create_task(self._receive())
        self._player = asyncio.create_task(self._play())
        return self

    async def begin(self, timeout=5):
        """open(), then connected and start: the call as Twilio starts it."""
        await self.open(timeout)
        await self.send_connected()
        await self.send_start()
        return self

    async def close(self, code=1000):
        """Closes the socket from the provider's side (no stop first); the close code."""
        if self.ws is not None:
            await self.ws.close(code)
        return await self.wait_closed(5)

    async def wait_closed(self, timeout, what="the stream to close"):
        """The close code (the service's, or 1006 without a close frame) once the socket is
        closed; AssertionError after `timeout`."""
        try:
            await asyncio.wait_for(self._closed.wait(), timeout)
            await asyncio.wait_for(self.ws.wait_closed(), timeout)
        except asyncio.TimeoutError:
            raise AssertionError("timed out after %ss waiting for %s; %s" % (timeout, what, self.summary())) from None
        self.close_code, self.close_reason = self.ws.close_code, self.ws.close_reason
        return self.close_code

    @property
    def is_closed(self):
        return self._closed.is_set()

    async def shutdown(self):
        """Cleanup for a test's finally: closes without waiting long, stops the tasks."""
        if self.ws is not None and not self._closed.is_set():
            try:
                await asyncio.wait_for(self.ws.close(), 3)
            except Exception:
                pass
        for task in (self._receiver, self._player):
            if task is not None and not task.done():
                task.cancel()
                try:
                    await task
                except BaseException:
                    pass

    # ---- sending

    def _next_seq(self):
        self._seq += 1
        return str(self._seq)

    def _bucket_take(self, now):
        if self._bucket_at is not None:
            self._bucket_tokens = min(self._bucket_burst,
                                      self._bucket_tokens + (now - self._bucket_at) * self._bucket_rate)
        self._bucket_at = now
        self._bucket_tokens -= 1

    def bucket_tokens(self):
        """What the mirrored token bucket holds now."""
        if self._bucket_at is None:
            return float(self._bucket_burst)
        return min(self._bucket_burst,
                   self._bucket_tokens + (time.monotonic() - self._bucket_at) * self._bucket_rate)

    async def until_bucket_holds(self, n, margin_s=0.05):
        """Waits the computed time until the mirrored bucket holds `n` messages (plus a small
        margin for the service's clock), so a burst of n stays within the limit."""
        missing = n - self.bucket_tokens()
        if missing > 0:
            await asyncio.sleep(missing / self._bucket_rate + margin_s)  # computed refill time, not a guess

    async def send_raw(self, data):
        """A text (str) or binary (bytes) message as is."""
        self._bucket_take(time.monotonic())
        await self.ws.send(data)

    async def send_json(self, message):
        await self.send_raw(json.dumps(message, separators=(",", ":")))

    async def send_connected(self):
        await self.send_json({"event": "connected", "protocol": "Call", "version": "1.0.0"})

    def start_message(self, call_sid=None):
        return {"event": "start", "sequenceNumber": self._next_seq(),
                "start": {"accountSid": self.account_sid, "streamSid": self.stream_sid,
                          "callSid": call_sid or self.call_sid, "tracks": ["inbound"],
                          "mediaFormat": {"encoding": "audio/x-mulaw", "sampleRate": RATE, "channels": 1},
                          "customParameters": self.custom_parameters},
                "streamSid": self.stream_sid}

    async def send_start(self, call_sid=None):
        await self.send_json(self.start_message(call_sid))

    def media_message(self, payload, stream_sid=None):
        """A media message carrying `payload` (bytes: base64-encoded here; str: sent as is)."""
        self._chunk += 1
        if isinstance(payload, (bytes, bytearray)):
            payload = base64.b64encode(payload).decode()
        return {"event": "media", "sequenceNumber": self._next_seq(),
                "media": {"track": "inbound", "chunk": str(self._chunk), "timestamp": str((self._chunk - 1) * 20),
                          "payload": payload},
                "streamSid": stream_sid or self.stream_sid}

    async def send_media(self, frame, stream_sid=None):
        await self.send_json(self.media_message(frame, stream_sid))
        now = time.monotonic()
        if self.first_media_sent_at is None:
            self.first_media_sent_at = now
        self.last_media_sent_at = now
        self.media_sent += 1

    async def send_audio(self, frames, interval=FRAME_S):
        """Sends the μ-law frames, one every `interval` seconds on a fixed schedule (interval
        None: as fast as the socket takes them). Returns the time of the first send."""
        t0 = time.monotonic()
        for i, frame in enumerate(frames):
            if interval:
                delay = t0 + i * interval - time.monotonic()
                if delay > 0:
                    await asyncio.sleep(delay)  # the 20 ms media clock
            await self.send_media(frame)
        return t0

    async def send_dtmf(self, digit):
        await self.send_json({"event": "dtmf", "streamSid": self.stream_sid, "sequenceNumber": self._next_seq(),
                              "dtmf": {"track": "inbound_track", "digit": digit}})

    async def send_mark(self, name):
        await self.send_json({"event": "mark", "streamSid": self.stream_sid, "sequenceNumber": self._next_seq(),
                              "mark": {"name": name}})

    async def send_stop(self):
        await self.send_json({"event": "stop", "sequenceNumber": self._next_seq(), "streamSid": self.stream_sid,
                              "stop": {"accountSid": self.account_sid, "callSid": self.call_sid}})

    # ---- receiving and playback

    async def _notify(self):
        async with self._cond:
            self._cond.notify_all()

    async def _receive(self):
        try:
            async for raw in self.ws:
                at = time.monotonic()
                r = Received(len(self.received), at, raw)
                self.received.append(r)
                if r.event == "media":
                    start = at if self._play_end is None or self._play_end < at else self._play_end
                    self._play_end = start + FRAME_S
                elif r.event == "mark":
                    due = self._play_end if self._play_end is not None and self._play_end > at else at
                    self._pending_marks.append([due, r.mark_name()])
                    self._wake.set()
                elif r.event == "clear":
                    if self._play_end is not None and self._play_end > at:
                        self.frames_dropped_by_clear += int(round((self._play_end - at) / FRAME_S))
                    self._play_end = at
                    for pending in self._pending_marks:
                        pending[0] = at
                    self._wake.set()
                await self._notify()
        except websockets.ConnectionClosed:
            pass
        finally:
            self._closed.set()
            self._wake.set()
            await self._notify()

    async def _play(self):
        """Echoes each mark once the media before it has played (or at once after a clear)."""
        try:
            while not self._closed.is_set():
                if not self._pending_marks:
                    self._wake.clear()
                    await self._wake.wait()
                    continue
                due, name = self._pending_marks[0]
                delay = due - time.monotonic()
                if delay > 0:
                    self._wake.clear()
                    try:
                        await asyncio.wait_for(self._wake.wait(), delay)  # until due, or a clear
                    except asyncio.TimeoutError:
                        pass
                    continue
                self._pending_marks.popleft()
                await self.send_mark(name)
                self.marks_echoed.append((time.monotonic(), name))
                await self._notify()
        except websockets.ConnectionClosed:
            pass

    def played_until(self):
        """When the buffered media will have played (None before the first media)."""
        return self._play_end

    # ---- reading what came

    def of(self, event, since=0):
        return [r for r in self.received[since:] if r.event == event]

    def media(self, since=0):
        return self.of("media", since)

    def audible(self, since=0, threshold=300):
        """Media messages whose decoded audio is not silence (RMS above `threshold`)."""
        return [r for r in self.media(since) if rms(r.pcm()) > threshold]

    def marks(self, since=0):
        return self.of("mark", since)

    def echoed_names(self):
        return [name for _, name in self.marks_echoed]

    def summary(self):
        counts = collections.Counter(r.event or "(not an event)" for r in self.received)
        return ("received %s; sent %d media; marks echoed %s; closed %s (code %s)"
                % (dict(counts), self.media_sent, self.echoed_names(), self._closed.is_set(),
                   self.ws.close_code if self.ws is not None else None))

    async def wait_until(self, predicate, timeout, what):
        """predicate()'s first true value, checked at each received message and mark echo;
        AssertionError after `timeout` or when the socket closes first."""
        try:
            async with self._cond:
                await asyncio.wait_for(self._cond.wait_for(lambda: predicate() or self._closed.is_set()), timeout)
        except asyncio.TimeoutError:
            raise AssertionError("timed out after %ss waiting for %s; %s" % (timeout, what, self.summary())) from None
        value = predicate()
        if not value:
            raise AssertionError("the stream closed while waiting for %s; %s" % (what, self.summary()))
        return value
