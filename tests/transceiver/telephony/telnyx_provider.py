"""A scripted Telnyx for black-box tests of rtcedge-transceiver's Telnyx endpoints, built on
twilio_provider.py (whose playback model, message recording and audio helpers are the same:
Telnyx's bidirectional RTP mode echoes marks and honours clear the way Twilio does).

It speaks what Telnyx documents:

    webhook   POST <service>/v1/telephony/telnyx[?custom params], the TeXML application's
              form-encoded call fields (CallSid, AccountSid, From, To, CallStatus, Direction),
              signed with Ed25519: telnyx-timestamp (unix seconds) and telnyx-signature-ed25519 =
              base64(Ed25519(account key, timestamp + "|" + raw body)); the answer's TeXML
              parsed (<Start><Stream url bidirectionalMode="rtp" bidirectionalCodec="PCMU">
              <Parameter/>…</Stream></Start><Pause/> or <Reject>)
    stream    connected {version}, start {stream_id, start: {user_id, call_control_id,
              media_format {PCMU, 8000, 1}, custom_parameters}}, media {stream_id, media:
              {track inbound, chunk, timestamp, payload}}, dtmf {dtmf: {digit}}, mark, stop —
              snake_case, stream_id on every message
(developers.telnyx.com: "Stream call media over WebSocket", the TeXML <Stream> verb, and
"Receiving webhooks"). Needs python3-cryptography for Ed25519."""

import base64
import http.client
import re
import secrets
import time
import urllib.parse
import xml.etree.ElementTree as ET

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

import twilio_provider as tp

WEBHOOK_PATH = "/v1/telephony/telnyx"
STREAM_PATH = re.compile(r"^/v1/telephony/telnyx/stream/(rtc_[0-9a-f]+)/([^/?#]+)$")
SIGN = tp.SIGN


class TeXML:
    """A parsed answer: kind "stream" (stream_url, attributes, parameters), "reject", or "other"."""

    def __init__(self, text):
        self.text = text
        self.root = ET.fromstring(text)
        self.kind, self.stream_url, self.attributes, self.parameters = "other", None, {}, {}
        self.reject_reason, self.pause_seconds = None, None
        stream = self.root.find("./Start/Stream")
        reject = self.root.find("./Reject")
        pause = self.root.find("./Pause")
        if stream is not None:
            self.kind = "stream"
            self.stream_url = stream.get("url")
            self.attributes = dict(stream.attrib)
            for p in stream.findall("./Parameter"):
                self.parameters[p.get("name")] = p.get("value")
        elif reject is not None:
            self.kind, self.reject_reason = "reject", reject.get("reason")
        if pause is not None:
            self.pause_seconds = int(pause.get("length", "0"))


class Answer:
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body
        self.texml = TeXML(body) if status == 200 and headers.get("content-type", "").startswith("text/xml") else None

    def __repr__(self):
        return "Answer(%d, %r)" % (self.status, self.body[:300])


class Call:
    def __init__(self, fields, answer):
        self.fields, self.answer = fields, answer
        self.call_sid = fields["CallSid"]
        self.stream_url = answer.texml.stream_url
        m = STREAM_PATH.match(urllib.parse.urlsplit(self.stream_url).path)
        if not m:
            raise AssertionError("stream url %r is not /v1/telephony/telnyx/stream/<rtc_…>/<token>" % self.stream_url)
        self.call_id, self.token = m.group(1), m.group(2)
        self.session_id = self.call_id[len("rtc_"):]


class TelnyxProvider:
    """A Telnyx account (its Ed25519 key pair) and its TeXML webhooks to 127.0.0.1:`http_port`."""

    def __init__(self, http_port, host="127.0.0.1"):
        self.http_port, self.host = http_port, host
        self.key = Ed25519PrivateKey.generate()
        raw = self.key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        self.public_key_b64 = base64.b64encode(raw).decode()   # what the portal shows
        self.account_sid = "%s-%s" % (secrets.token_hex(4), secrets.token_hex(6))

    def sign(self, timestamp, body):
        return base64.b64encode(self.key.sign(("%s|%s" % (timestamp, body)).encode())).decode()

    def call_fields(self, call_sid=None):
        return {"AccountSid": self.account_sid, "CallSid": call_sid or "v3:" + secrets.token_urlsafe(24),
                "CallStatus": "ringing", "Direction": "inbound", "From": "+13125550100", "To": "+13125550199",
                "CallerId": "+13125550100"}

    def post_webhook(self, fields, query=None, signature=SIGN, timestamp=None, timeout=10):
        body = urllib.parse.urlencode(fields)
        timestamp = str(int(time.time())) if timestamp is None else timestamp
        headers = {"Content-Type": "application/x-www-form-urlencoded", "telnyx-timestamp": timestamp}
        if signature is SIGN:
            signature = self.sign(timestamp, body)
        if signature is not None:
            headers["telnyx-signature-ed25519"] = signature
        path = WEBHOOK_PATH + (("?" + urllib.parse.urlencode(query)) if query else "")
        conn = http.client.HTTPConnection(self.host, self.http_port, timeout=timeout)
        try:
            conn.request("POST", path, body=body, headers=headers)
            r = conn.getresponse()
            return Answer(r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode(errors="replace"))
        finally:
            conn.close()

    def answer(self, query=None):
        fields = self.call_fields()
        answer = self.post_webhook(fields, query)
        if answer.texml is None or answer.texml.kind != "stream":
            raise AssertionError("the webhook was not answered with <Start><Stream>: %r" % answer)
        return Call(fields, answer)

    def stream(self, call, url=None, custom_parameters=None):
        return TelnyxStream(url or call.stream_url, call.call_sid, self.account_sid, custom_parameters)


class TelnyxStream(tp.TwilioStream):
    """The stream as Telnyx speaks it; receiving, playback and marks are Twilio's model."""

    def __init__(self, url, call_sid, account_sid, custom_parameters=None):
        super().__init__(url, call_sid, account_sid, custom_parameters,
                         stream_sid="%s-%s" % (secrets.token_hex(4).upper(), secrets.token_hex(6).upper()))
        self.call_control_id = "v3:" + secrets.token_urlsafe(24)   # not the TeXML CallSid

    async def send_connected(self):
        await self.send_json({"event": "connected", "version": "1.0.0"})

    def start_message(self, call_sid=None):
        return {"event": "start", "sequence_number": self._next_seq(), "stream_id": self.stream_sid,
                "start": {"user_id": self.account_sid, "call_control_id": call_sid or self.call_control_id,
                          "client_state": None,
                          "media_format": {"encoding": "PCMU", "sample_rate": tp.RATE, "channels": 1},
                          "custom_parameters": self.custom_parameters}}

    def media_message(self, payload, stream_sid=None):
        self._chunk += 1
        if isinstance(payload, (bytes, bytearray)):
            payload = base64.b64encode(payload).decode()
        return {"event": "media", "sequence_number": self._next_seq(), "stream_id": stream_sid or self.stream_sid,
                "media": {"track": "inbound", "chunk": str(self._chunk), "timestamp": str((self._chunk - 1) * 20),
                          "payload": payload}}

    async def send_dtmf(self, digit):
        await self.send_json({"event": "dtmf", "stream_id": self.stream_sid, "sequence_number": self._next_seq(),
                              "dtmf": {"digit": digit}})

    async def send_mark(self, name):
        await self.send_json({"event": "mark", "stream_id": self.stream_sid, "sequence_number": self._next_seq(),
                              "mark": {"name": name}})

    async def send_stop(self):
        await self.send_json({"event": "stop", "sequence_number": self._next_seq(), "stream_id": self.stream_sid,
                              "stop": {"user_id": self.account_sid, "call_control_id": self.call_control_id}})
