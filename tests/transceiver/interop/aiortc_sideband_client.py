#!/usr/bin/python3
"""aiortc_sideband_client.py — an app server's sideband (GET /v1/realtime?call_id=, a WebSocket
with the server key) beside a Realtime call from aiortc (the "browser", oai-events + audio),
against an rtcedge transceiver running the embedded echo backend in parrot mode with
realtime.sideband.tool_timeout 1s and two server keys:

  /usr/bin/python3 aiortc_sideband_client.py --url http://127.0.0.1:8080 --api-key K --other-api-key K2

--app-url (default --url) is where the app server talks to the fleet: the sideband WebSockets,
their refusals, the GET and the hangup go there, while the key is minted and the call made at
--url, and the call's own counters (steps 5 and 9) are read there, at its owner. With another
pod's URL (run_browser_e2e.py --fleet) every app-server request is one that pod forwards to the
owner, and step 11 reads that pod's rtcedge_transceiver_calls_forwarded_total.

Checked in one run, each step with its own deadline:
  1. the app server mints an ek_ key whose session carries the data-channel policy
     (client.data_channel.allowed_client_events / allowed_server_events: no response.cancel,
     no function-call events for the browser);
  2. the browser creates the call with it (oai-events, sendrecv audio: silence out, every
     received 20 ms frame measured at 440 Hz and its neighbours);
  3. the sideband attaches with the server key: session.created first, the browser's session
     id; refused: an ek_ key (403 sideband_needs_server_key), another server key (404
     call_not_found), a plain GET (426);
  4. the sideband's session.update (instructions, a get_weather tool) reaches both as
     session.updated; the browser's own instructions are refused "(set by the app server)",
     and GET /v1/realtime/calls/<id> still says "server rules";
  5. the browser's response.cancel is refused (client_event_not_allowed, its event_id, counted);
  6. a tool round trip: the browser's `call get_weather {...}` turn; the sideband alone sees
     the function call, answers it; the browser reads `the tool said: ...` and hears 440 Hz;
  7. the sideband's arrival minus the data channel's for every event both got live, over the
     whole run (count, median, p95, min, max; at least 10 events, no bound on the value);
  8. a sideband gap: a text turn while none is attached is replayed to the next one after
     rtcedge.sideband.missed, with the event_ids the browser saw (the turn starts once the
     call has surely heard of the close: see the step);
  9. a function call whose sideband leaves without answering is answered by the edge
     (tool_call_timed_out) after the tool timeout; the metric counts it;
 10. hangup with the server key: the sideband hears rtcedge.call.ended {reason:"deleted"},
     then close 1000; the browser's PeerConnection leaves "connected" (for aiortc 1.4: its
     DTLS transport closes, as its connectionState does not follow a remote close_notify);
 11. only when --app-url is not --url: the app server's pod counted forwarded requests,
     calls_forwarded_total{kind="websocket"} >= 1 and {kind="http"} >= 1.
The browser gets no event that carries the function call's call_id (a policy without
response.function_call_arguments.done cuts tool items out of response.done and the rest).
Prints one JSON result. Exit 0 pass, 1 fail (a missing package too), 2 bad usage. Run by
../e2e/run_browser_e2e.py --client aiortc-sideband (CTest transceiver_interop_aiortc_sideband_*).
"""

import argparse
import asyncio
import base64
import collections
import http.client
import json
import math
import os
import statistics
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support", "py"))
sys.path.insert(0, HERE)

try:
    import numpy as np
    import websockets
    from aiortc import RTCPeerConnection, RTCSessionDescription

    import aiortc_client
    from rtcetest.aio import receive_frames
    from rtcetest.core import percentile
except ImportError as e:  # pragma: no cover - scripts/install-deps.sh installs them
    print(f"FAIL: setup: {e}", flush=True)
    sys.exit(1)

# What the browser may send, and hear: everything this test's browser needs except
# response.cancel (step 5) and the function-call events (step 6).
ALLOWED_CLIENT_EVENTS = ["conversation.item.create", "response.create", "session.update",
                         "input_audio_buffer.clear"]
FUNCTION_CALL_EVENTS = ["response.function_call_arguments.delta", "response.function_call_arguments.done",
                        "response.output_item.added", "response.output_item.done"]
ALLOWED_SERVER_EVENTS = ["session.updated", "error", "response.created", "response.done",
                         "response.content_part.added", "response.content_part.done",
                         "response.output_text.delta", "response.output_text.done",
                         "output_audio_buffer.started", "output_audio_buffer.stopped",
                         "output_audio_buffer.cleared", "input_audio_buffer.speech_started",
                         "input_audio_buffer.speech_stopped", "input_audio_buffer.committed"]
WEATHER_TOOL = {"type": "function", "name": "get_weather", "description": "the weather in a city",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}
TOOL_OUTPUT = '{"temp_c":21}'
TONE_HZ = 440.0
NEIGHBOUR_HZ = (240.0, 640.0)  # outside the Hann window's main lobe (+-100 Hz at 20 ms)


class Inbox:
    """Messages received on one side, each with its arrival time, and deadline waits on them."""

    def __init__(self, name):
        self.name = name
        self.items = []  # {"t": monotonic, "event": dict, "replay": bool}
        self.changed = asyncio.Event()
        self.closed = None  # (code, reason) once the socket closed
        self._replays_left = 0

    def add(self, message):
        t = time.monotonic()
        try:
            event = json.loads(message) if isinstance(message, str) else {"binary": len(message)}
        except ValueError:
            event = {"unparsable": message[:200]}
        if not isinstance(event, dict):
            event = {"not_an_object": event}
        replay = self._replays_left > 0
        if replay:
            self._replays_left -= 1
        if event.get("type") == "rtcedge.sideband.missed":
            self._replays_left = int(event.get("replayed_events") or 0)
        self.items.append({"t": t, "event": event, "replay": replay})
        self.changed.set()

    def mark(self):
        return len(self.items)

    def events(self, start=0):
        return [item["event"] for item in self.items[start:]]

    async def wait_for(self, predicate, timeout_s, start=0):
        """(index, event) of the first event from `start` on that matches, or (None, None)."""
        deadline = time.monotonic() + timeout_s
        while True:
            for index in range(start, len(self.items)):
                if predicate(self.items[index]["event"]):
                    return index, self.items[index]["event"]
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.closed is not None:
                return None, None
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass


class Sideband:
    """The app server's WebSocket on the call and a task reading it into an Inbox."""

    def __init__(self, name, ws):
        self.ws = ws
        self.inbox = Inbox(name)
        self.task = asyncio.ensure_future(self._read())

    async def _read(self):
        try:
            async for message in self.ws:
                self.inbox.add(message)
        except websockets.ConnectionClosed:
            pass
        finally:
            self.inbox.closed = (self.ws.close_code, self.ws.close_reason)
            self.inbox.changed.set()

    def send(self, event):
        return self.ws.send(json.dumps(event))

    async def close(self):
        await asyncio.wait_for(self.ws.close(), 5)
        await asyncio.wait_for(self.task, 5)


class AudioMeter:
    """Every received 20 ms frame: when, level, and the power at 440 Hz against its neighbours
    (Goertzel-style single-bin DFTs over a Hann window); the newest samples for one FFT."""

    def __init__(self):
        self.frames = []  # (t, rms_dbfs, tone_over_neighbours_db)
        self.samples = collections.deque(maxlen=500)  # (t, float32 mono), 10 s
        self.rate = None
        self._basis = {}

    def _bases(self, n, rate):
        key = (n, rate)
        if key not in self._basis:
            t = np.arange(n) / rate
            window = np.hanning(n)
            self._basis[key] = [window * np.exp(-2j * np.pi * f * t) for f in (TONE_HZ,) + NEIGHBOUR_HZ]
        return self._basis[key]

    def on_frame(self, frame):
        mono, rate = aiortc_client.frame_to_mono(frame)
        if len(mono) < 64:
            return
        self.rate = rate
        t = time.monotonic()
        powers = [abs(np.dot(basis, mono)) ** 2 for basis in self._bases(len(mono), rate)]
        neighbours = max(sum(powers[1:]) / len(powers[1:]), 1e-30)
        rms_dbfs = 10 * math.log10(float(np.mean(mono ** 2)) + 1e-30)
        self.frames.append((t, rms_dbfs, 10 * math.log10(max(powers[0], 1e-30) / neighbours)))
        self.samples.append((t, mono.astype(np.float32)))

    def tone_frames(self, since, min_dbfs=-40.0, min_ratio_db=20.0):
        return [f for f in self.frames if f[0] >= since and f[1] >= min_dbfs and f[2] >= min_ratio_db]

    def analyse_since(self, since):
        """aiortc_client.analyse_tone over the received samples since `since` (None when too few)."""
        chunks = [s for t, s in list(self.samples) if t >= since]
        if not chunks or self.rate is None:
            return None
        samples = np.concatenate(chunks).astype(np.float64)
        return aiortc_client.analyse_tone(samples, self.rate) if len(samples) >= 4096 else None


def raw_get(url, path, headers, timeout=5.0):
    """(status, parsed JSON body or text) of a GET, with the given headers; a 101 is closed at once."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        if response.status == 101:
            return 101, None
        body = response.read().decode(errors="replace")
        try:
            return response.status, json.loads(body)
        except ValueError:
            return response.status, body
    except OSError as e:
        return 0, str(e)
    finally:
        conn.close()


def upgrade_headers(key):
    headers = {"Upgrade": "websocket", "Connection": "Upgrade", "Sec-WebSocket-Version": "13",
               "Sec-WebSocket-Key": base64.b64encode(os.urandom(16)).decode()}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return headers


def error_code(body):
    return body.get("error", {}).get("code") if isinstance(body, dict) else None


async def metric(url, name, label=None):
    """The sum of a counter's samples at url/metrics (those with `label` in their labels)."""
    status, _, raw = await aiortc_client.http("GET", f"{url}/metrics", "")
    if status != 200:
        return None
    total = 0.0
    for line in raw.decode().splitlines():
        if not (line.startswith(name + " ") or line.startswith(name + "{")):
            continue
        if label and label not in line.split(" ", 1)[0]:
            continue
        total += float(line.rsplit(" ", 1)[1])
    return total


async def wait_metric(url, name, at_least, timeout_s, label=None):
    deadline = time.monotonic() + timeout_s
    while True:
        value = await metric(url, name, label)
        if (value or 0) >= at_least or time.monotonic() >= deadline:
            return value
        await asyncio.sleep(0.05)


def find_key(value, key):
    """The first value of `key` anywhere in nested JSON (None when absent)."""
    if isinstance(value, dict):
        if key in value:
            return value[key]
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            found = find_key(item, key)
            if found is not None:
                return found
    return None


def of_type(name):
    return lambda e: e.get("type") == name


def latency(browser, sidebands, result):
    """Sideband arrival - data-channel arrival (ms) of every event both got with the same
    event_id (a sideband's replays left out); the stats into result["latency_ms"]."""
    first_dc = {}
    for item in browser.items:
        first_dc.setdefault(item["event"].get("event_id"), item["t"])
    deltas, per_event = [], []
    for sideband in sidebands:
        for item in sideband.inbox.items:
            event_id = item["event"].get("event_id")
            if not item["replay"] and event_id in first_dc:
                deltas.append((item["t"] - first_dc[event_id]) * 1000)
                per_event.append(f"{item['event'].get('type')} {deltas[-1]:+.2f}")
    result["latency_ms"] = {
        "matched_events": len(deltas),
        "median": round(statistics.median(deltas), 3) if deltas else None,
        "p95": round(percentile(deltas, 95), 3) if deltas else None,
        "min": round(min(deltas), 3) if deltas else None,
        "max": round(max(deltas), 3) if deltas else None,
        "note": "sideband arrival - data channel arrival, same event_id (negative: the sideband was first)",
        "events": per_event}
    return deltas


class StepFailed(Exception):
    pass


def check(condition, message):
    if not condition:
        raise StepFailed(message)


async def run(args, result):
    pc = RTCPeerConnection()
    browser = Inbox("browser")
    meter = AudioMeter()
    opened = asyncio.Event()
    left_connected = asyncio.Event()
    sidebands = []
    steps = result.setdefault("steps", {})
    step = "setup"
    # The app server's side (the sideband, the GET, the hangup) talks to --app-url.
    app_url = args.app_url or args.url
    ws_base = "ws" + app_url[len("http"):] if app_url.startswith("http") else app_url

    @pc.on("connectionstatechange")
    def on_state():
        result.setdefault("states", []).append(pc.connectionState)
        if pc.connectionState in ("closed", "failed", "disconnected") and "connected" in result["states"]:
            result.setdefault("left_connected_at", time.monotonic())
            result.setdefault("left_connected_by", f"connectionState {pc.connectionState}")
            left_connected.set()

    @pc.on("track")
    def on_track(track):
        if track.kind == "audio":
            asyncio.ensure_future(receive_frames(track, meter.on_frame))

    channel = pc.createDataChannel("oai-events")
    channel.on("open", opened.set)
    channel.on("message", browser.add)
    channel.on("close", lambda: result.setdefault("channel_closed_at", time.monotonic()))

    def watch_dtls(transport):
        # aiortc 1.4 keeps connectionState "connected" when the remote closes DTLS (its state
        # machine has no case for a closed DTLS transport under completed ICE; only ICE consent
        # failing, ~30 s later, moves it): the DTLS transport's own state is where a remote
        # close_notify shows. Either counts as leaving "connected".
        @transport.on("statechange")
        def on_dtls_state():
            result.setdefault("dtls_states", []).append(transport.state)
            if transport.state in ("closed", "failed"):
                result.setdefault("left_connected_at", time.monotonic())
                result.setdefault("left_connected_by", f"dtls {transport.state}")
                left_connected.set()

    async def attach(name):
        ws = await websockets.connect(f"{ws_base}/v1/realtime?call_id={call_id}",
                                      extra_headers={"Authorization": f"Bearer {args.api_key}"},
                                      open_timeout=5, close_timeout=5, max_size=1 << 22)
        sideband = Sideband(name, ws)
        sidebands.append(sideband)
        _, created = await sideband.inbox.wait_for(lambda e: True, 5)
        check(created is not None and created.get("type") == "session.created",
              f"{name}: the first event is not session.created: {created}")
        return sideband, created

    def send_browser(event):
        channel.send(json.dumps(event))

    def text_turn(text, tag):
        send_browser({"type": "conversation.item.create", "event_id": f"client_item_{tag}",
                      "item": {"type": "message", "role": "user",
                               "content": [{"type": "input_text", "text": text}]}})
        send_browser({"type": "response.create", "event_id": f"client_response_{tag}"})

    call_id = None
    try:
        # 1. The app server mints the browser's key; its session carries the policy, not the tools.
        step = "1_mint"
        body = json.dumps({"expires_after": {"anchor": "created_at", "seconds": 600},
                           "session": {"type": "realtime", "instructions": "minted rules",
                                       "client": {"data_channel": {
                                           "allowed_client_events": ALLOWED_CLIENT_EVENTS,
                                           "allowed_server_events": ALLOWED_SERVER_EVENTS}}}}).encode()
        status, _, raw = await aiortc_client.http("POST", f"{args.url}/v1/realtime/client_secrets", args.api_key,
                                                  body=body, content_type="application/json")
        check(status == 200, f"client_secrets: HTTP {status}: {raw[:300]!r}")
        ek = json.loads(raw).get("value", "")
        check(str(ek).startswith("ek_"), f"client_secrets: no ek_ value in {raw[:300]!r}")
        steps[step] = "ok"

        # 2. The browser's call with the ek_ key: a silent microphone, sendrecv.
        step = "2_call"
        pc.addTransceiver(aiortc_client.ToneTrack(0.0, -120.0), direction="sendrecv")  # 0 Hz: silence
        await asyncio.wait_for(pc.setLocalDescription(await pc.createOffer()), 10)
        offer = "".join(line for line in pc.localDescription.sdp.splitlines(keepends=True)
                        if not line.startswith(("a=candidate:", "a=end-of-candidates")))
        status, headers, raw = await aiortc_client.http("POST", f"{args.url}/v1/realtime/calls", ek,
                                                        body=offer.encode(), content_type="application/sdp")
        check(status == 201, f"POST /v1/realtime/calls: HTTP {status}: {raw[:300]!r}")
        location = next((v for k, v in headers.items() if k.lower() == "location"), "")
        call_id = location.rstrip("/").rsplit("/", 1)[-1]
        result["call_id"] = call_id
        check(call_id.startswith("rtc_"), f"Location {location!r} does not end in rtc_<id>")
        # The app server's URL of the call: the Location's path on its own pod.
        call_url = urllib.parse.urljoin(app_url + "/", urllib.parse.urlsplit(location).path)
        result["call_url"] = call_url
        await asyncio.wait_for(pc.setRemoteDescription(RTCSessionDescription(raw.decode(), "answer")), 10)
        try:
            await asyncio.wait_for(opened.wait(), args.timeout_s)
        except asyncio.TimeoutError:
            raise StepFailed(f"oai-events not open after {args.timeout_s} s (states {result.get('states')})")
        watch_dtls(pc.sctp.transport)
        _, browser_created = await browser.wait_for(lambda e: True, 5)
        check(browser_created is not None and browser_created.get("type") == "session.created",
              f"the browser's first event is not session.created: {browser_created}")
        session_id = browser_created.get("session", {}).get("id")
        check(isinstance(session_id, str) and session_id, f"session.created has no session id: {browser_created}")
        policy = browser_created["session"].get("client", {}).get("data_channel", {})
        check(policy.get("allowed_client_events") == ALLOWED_CLIENT_EVENTS,
              f"the minted policy is not the session's: {policy}")
        steps[step] = "ok"

        # 3. The sideband, and the requests that must not get one.
        step = "3_sideband"
        sb1, sb_created = await attach("sideband1")
        check(sb_created.get("session", {}).get("id") == session_id,
              f"the sideband's session id {sb_created.get('session', {}).get('id')} is not the browser's {session_id}")
        path = f"/v1/realtime?call_id={call_id}"
        refusals = {}
        status, body = await asyncio.to_thread(raw_get, app_url, path, upgrade_headers(ek))
        refusals["ek_key"] = [status, error_code(body)]
        check((status, error_code(body)) == (403, "sideband_needs_server_key"), f"ek_ key: {status} {body}")
        if args.other_api_key:
            status, body = await asyncio.to_thread(raw_get, app_url, path, upgrade_headers(args.other_api_key))
            refusals["other_server_key"] = [status, error_code(body)]
            check((status, error_code(body)) == (404, "call_not_found"), f"another server key: {status} {body}")
        else:
            refusals["other_server_key"] = "skipped: the transceiver was given one server key"
        status, body = await asyncio.to_thread(raw_get, app_url, path, {"Authorization": f"Bearer {args.api_key}"})
        refusals["plain_get"] = [status, error_code(body)]
        check(status == 426, f"a plain GET: {status} {body}")
        result["refusals"] = refusals
        steps[step] = "ok"

        # 4. The app server's session fields; the browser cannot change them.
        step = "4_session_fields"
        b_mark, s_mark = browser.mark(), sb1.inbox.mark()
        await sb1.send({"type": "session.update", "event_id": "server_update_1",
                        "session": {"type": "realtime", "instructions": "server rules", "tools": [WEATHER_TOOL]}})
        for side, inbox, mark in (("sideband", sb1.inbox, s_mark), ("browser", browser, b_mark)):
            _, updated = await inbox.wait_for(of_type("session.updated"), 5, start=mark)
            check(updated is not None, f"the {side} got no session.updated after the sideband's session.update")
            session = updated.get("session", {})
            check(session.get("instructions") == "server rules"
                  and [t.get("name") for t in session.get("tools", [])] == ["get_weather"],
                  f"the {side}'s session.updated lacks the server's fields: {session}")
        b_mark = browser.mark()
        send_browser({"type": "session.update", "event_id": "client_rules_1",
                      "session": {"type": "realtime", "instructions": "browser rules"}})
        _, updated = await browser.wait_for(of_type("session.updated"), 5, start=b_mark)
        check(updated is not None, "the browser's session.update got no session.updated")
        check(updated["session"].get("instructions") == "server rules",
              f"the browser changed the instructions: {updated['session'].get('instructions')!r}")
        _, refused = await browser.wait_for(of_type("error"), 5, start=b_mark)
        check(refused is not None, "the browser's instructions got no error")
        err = refused.get("error", {})
        check(err.get("code") == "unsupported_session_field" and "(set by the app server)" in err.get("message", "")
              and err.get("event_id") == "client_rules_1", f"the refusal is not the expected error: {err}")
        status, _, raw = await aiortc_client.http("GET", call_url, args.api_key)
        check(status == 200, f"GET {call_url}: HTTP {status}: {raw[:200]!r}")
        realtime_session = find_key(json.loads(raw), "realtime_session") or {}
        check(realtime_session.get("instructions") == "server rules",
              f"GET of the call: instructions {realtime_session.get('instructions')!r}")
        result["browser_refusal_message"] = err.get("message")
        steps[step] = "ok"

        # 5. An event off the browser's list.
        step = "5_client_event_not_allowed"
        before = await metric(args.url, "rtcedge_transceiver_realtime_events_dropped_total",
                              'reason="client_event_not_allowed"') or 0
        b_mark = browser.mark()
        send_browser({"type": "response.cancel", "event_id": "client_cancel_1"})
        _, refused = await browser.wait_for(
            lambda e: e.get("type") == "error" and e.get("error", {}).get("event_id") == "client_cancel_1", 5,
            start=b_mark)
        check(refused is not None, "response.cancel got no error naming its event_id")
        check(refused["error"].get("code") == "client_event_not_allowed", f"response.cancel: {refused['error']}")
        after = await wait_metric(args.url, "rtcedge_transceiver_realtime_events_dropped_total", before + 1, 3,
                                  'reason="client_event_not_allowed"')
        result["client_event_not_allowed_metric"] = after
        check((after or 0) >= before + 1, f"the drop metric did not count it ({before} -> {after})")
        steps[step] = "ok"

        # 6. The tool round trip: the sideband alone sees the call and answers it.
        step = "6_tool_round_trip"
        b_mark, s_mark = browser.mark(), sb1.inbox.mark()
        text_turn('call get_weather {"city":"Paris"}', "tool")
        _, call = await sb1.inbox.wait_for(of_type("response.function_call_arguments.done"), 5, start=s_mark)
        check(call is not None, "the sideband saw no response.function_call_arguments.done")
        check(call.get("name") == "get_weather" and isinstance(call.get("call_id"), str)
              and json.loads(call.get("arguments") or "null") == {"city": "Paris"}, f"the function call: {call}")
        _, call_done = await sb1.inbox.wait_for(of_type("response.done"), 5, start=s_mark)
        check(call_done is not None, "the sideband saw no response.done for the function call")
        # The browser has had the response.done the sideband had (same worker turn): what it got
        # of the function-call response is all it gets.
        await browser.wait_for(lambda e: e.get("event_id") == call_done.get("event_id"), 3, start=b_mark)
        seen = [e.get("type") for e in browser.events(b_mark)]
        leaked = [t for t in seen if t in FUNCTION_CALL_EVENTS or str(t).startswith("response.function_call")]
        result["browser_events_of_the_function_call"] = seen
        check(not leaked, f"the browser got function-call events: {leaked}")
        result["browser_events_carrying_the_call_id"] = [
            e.get("type") for e in browser.events(b_mark) if call["call_id"] in json.dumps(e)]
        check(not result["browser_events_carrying_the_call_id"],
              f"the browser saw the call inside {result['browser_events_carrying_the_call_id']}")
        s_mark = sb1.inbox.mark()
        answered_at = time.monotonic()
        await sb1.send({"type": "conversation.item.create", "event_id": "server_output_1",
                        "item": {"type": "function_call_output", "call_id": call["call_id"], "output": TOOL_OUTPUT}})
        await sb1.send({"type": "response.create", "event_id": "server_response_1"})
        want = f"the tool said: {TOOL_OUTPUT}"
        _, said = await browser.wait_for(
            lambda e: e.get("type") == "response.output_text.done" and want in str(e.get("text")), 5, start=b_mark)
        check(said is not None, f"the browser got no response.output_text.done with {want!r} "
                                f"(got {[e.get('type') for e in browser.events(b_mark)]})")
        result["tool_reply_ms"] = round((browser.items[browser.mark() - 1]["t"] - answered_at) * 1000, 1)
        deadline = time.monotonic() + 5
        while len(meter.tone_frames(answered_at)) < 10 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        tone = meter.tone_frames(answered_at)
        result["tone"] = {"frames_at_440": len(tone),
                          "frames_at_440_before_the_answer": len(meter.tone_frames(0)) - len(tone),
                          "first_after_answer_ms": round((tone[0][0] - answered_at) * 1000) if tone else None,
                          "min_440_over_neighbours_db": round(min(f[2] for f in tone), 1) if tone else None,
                          "max_rms_dbfs": round(max(f[1] for f in tone), 1) if tone else None,
                          "frames_received": len(meter.frames),
                          "fft": meter.analyse_since(answered_at)}
        check(len(tone) >= 10, f"the browser did not hear 440 Hz for 200 ms after the tool output "
                               f"({len(tone)} frames of {len(meter.frames)} received)")
        steps[step] = "ok"

        # 8. A gap with no sideband: what it missed is replayed to the next one.
        step = "8_missed_events"
        # The owner's count of closed sideband sockets (args.url is the call's pod).
        closed_name = "rtcedge_transceiver_sideband_sockets_closed_total"
        closed_before = await metric(args.url, closed_name)
        check(closed_before is not None, f"no {closed_name} on the call's pod")
        await sb1.close()
        result["sideband1_close"] = sb1.inbox.closed
        # On the owner, events the call sends a closing socket are given back and kept, however
        # late the call hears of the close. Through another pod the bridge cannot give back what
        # the owner sent in the pod-to-pod round trip before the owner's socket closed
        # (docs/realtime.md, "Coming back"): the turn starts once the owner's socket has.
        closed_after = await wait_metric(args.url, closed_name, closed_before + 1, 5)
        check(closed_after is not None and closed_after >= closed_before + 1,
              "the owner did not count the sideband's close within 5 s")
        b_mark = browser.mark()
        text_turn("hello", "hello")
        _, hello_done = await browser.wait_for(of_type("response.done"), 5, start=b_mark)
        check(hello_done is not None, "the browser got no response.done for hello")
        sb2, _ = await attach("sideband2")
        _, missed = await sb2.inbox.wait_for(lambda e: True, 5, start=1)
        check(missed is not None and missed.get("type") == "rtcedge.sideband.missed",
              f"after session.created the sideband got {missed}, not rtcedge.sideband.missed")
        check(missed.get("missed_events", 0) >= 1
              and missed.get("lost_events") == missed.get("missed_events", 0) - missed.get("replayed_events", 0),
              f"rtcedge.sideband.missed: {missed}")
        replayed = missed.get("replayed_events", 0)
        # session.created, rtcedge.sideband.missed, then the replayed events.
        await sb2.inbox.wait_for(lambda e: True, 5, start=1 + replayed)
        replays = [i["event"] for i in sb2.inbox.items if i["replay"]]
        check(len(replays) == replayed, f"{len(replays)} events replayed, {replayed} announced")
        check(any(e.get("type") == "response.done" and e.get("event_id") == hello_done.get("event_id")
                  for e in replays),
              f"the replay lacks the browser's response.done {hello_done.get('event_id')}: "
              f"{[(e.get('type'), e.get('event_id')) for e in replays]}")
        browser_ids = {e.get("event_id") for e in browser.events(b_mark)}
        result["missed"] = dict(missed, replayed_types=[e.get("type") for e in replays],
                                replayed_the_browser_saw=sum(1 for e in replays if e.get("event_id") in browser_ids))
        steps[step] = "ok"

        # 9. The sideband leaves a function call unanswered: the edge answers it.
        step = "9_tool_timeout"
        before = await metric(args.url, "rtcedge_transceiver_tool_calls_timed_out_total") or 0
        b_mark, s_mark = browser.mark(), sb2.inbox.mark()
        text_turn("call get_weather {}", "timeout")
        _, call = await sb2.inbox.wait_for(of_type("response.function_call_arguments.done"), 5, start=s_mark)
        check(call is not None, "the sideband saw no function call for `call get_weather {}`")
        await sb2.close()
        left_at = time.monotonic()
        _, timed_out = await browser.wait_for(
            lambda e: e.get("type") == "response.output_text.done" and "tool_call_timed_out" in str(e.get("text")),
            args.tool_timeout_s + 5, start=b_mark)
        check(timed_out is not None, f"no response.output_text.done with tool_call_timed_out within "
                                     f"{args.tool_timeout_s + 5} s of the sideband leaving")
        result["tool_timeout_answered_after_ms"] = round((browser.items[-1]["t"] - left_at) * 1000)
        after = await wait_metric(args.url, "rtcedge_transceiver_tool_calls_timed_out_total", before + 1, 3)
        result["tool_calls_timed_out_metric"] = after
        check((after or 0) >= 1 and (after or 0) >= before + 1, f"tool_calls_timed_out_total {before} -> {after}")
        steps[step] = "ok"

        # 10. The app server hangs up.
        step = "10_hangup"
        sb3, _ = await attach("sideband3")
        s_mark = sb3.inbox.mark()
        check(not left_connected.is_set(), f"the browser left connected before the hangup ({result.get('states')}, "
                                           f"DTLS {result.get('dtls_states')})")
        hung_up_at = time.monotonic()
        status, _, raw = await aiortc_client.http("POST", f"{call_url}/hangup", args.api_key, body=b"")
        check(status == 200, f"hangup: HTTP {status}: {raw[:200]!r}")
        _, ended = await sb3.inbox.wait_for(of_type("rtcedge.call.ended"), 5, start=s_mark)
        check(ended is not None, "the sideband got no rtcedge.call.ended")
        check(ended.get("reason") == "deleted", f"rtcedge.call.ended: {ended}")
        try:
            await asyncio.wait_for(sb3.task, 5)
        except asyncio.TimeoutError:
            raise StepFailed("the sideband was not closed within 5 s of rtcedge.call.ended")
        result["sideband3_close"] = sb3.inbox.closed
        check(sb3.inbox.closed[0] == 1000 and "deleted" in (sb3.inbox.closed[1] or ""),
              f"the sideband's close: {sb3.inbox.closed}")
        after_ended = [e.get("type") for e in sb3.inbox.events(s_mark)]
        check(after_ended[-1] == "rtcedge.call.ended", f"events after rtcedge.call.ended: {after_ended}")
        try:
            await asyncio.wait_for(left_connected.wait(), args.hangup_deadline_s)
        except asyncio.TimeoutError:
            raise StepFailed(f"the browser's PeerConnection still {pc.connectionState!r}, DTLS "
                             f"{pc.sctp.transport.state!r}, {args.hangup_deadline_s} s after the hangup "
                             f"(states {result.get('states')})")
        result["browser_left_connected_ms"] = round((result["left_connected_at"] - hung_up_at) * 1000)
        result["browser_after_hangup"] = {"connection_state": pc.connectionState,
                                          "dtls_state": pc.sctp.transport.state,
                                          "channel_state": channel.readyState}
        steps[step] = "ok"

        # 7. Sideband arrival minus data-channel arrival, for every live event both got (over
        # the whole run: the three sidebands' live events, not the replays).
        step = "7_latency"
        deltas = latency(browser, sidebands, result)
        check(len(deltas) >= 10, f"only {len(deltas)} events reached both the sideband and the browser")
        steps[step] = "ok"

        # 11. Another pod served the app server: it forwarded the sideband and the HTTP requests.
        if app_url != args.url:
            step = "11_forwarded"
            forwarded = {kind: await metric(app_url, "rtcedge_transceiver_calls_forwarded_total", f'kind="{kind}"')
                         for kind in ("websocket", "http")}
            result["forwarded_at_app_url"] = forwarded
            check(all((forwarded[kind] or 0) >= 1 for kind in forwarded),
                  f"{app_url} forwarded too little: calls_forwarded_total {forwarded}")
            steps[step] = "ok"
        return True
    except StepFailed as e:
        result["error"] = f"{step}: {e}"
        return False
    except Exception as e:  # a refused handshake, a timeout of a request: the step failed
        result["error"] = f"{step}: {type(e).__name__}: {e}"
        return False
    finally:
        result["failed_step"] = None if result.get("error") is None else step
        if "latency_ms" not in result:
            latency(browser, sidebands, result)
        result["browser_events"] = len(browser.items)
        result["sideband_events"] = [len(s.inbox.items) for s in sidebands]
        for sideband in sidebands:
            if sideband.inbox.closed is None:
                try:
                    await sideband.close()
                except (asyncio.TimeoutError, websockets.WebSocketException, OSError):
                    sideband.task.cancel()
        await asyncio.wait_for(pc.close(), 5)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True,
                    help="the transceiver's signaling base URL: the key is minted and the call made here")
    ap.add_argument("--app-url", default=None,
                    help="the app server's base URL for the sideband, the GET and the hangup "
                         "(default --url; another pod of the fleet to test forwarding)")
    ap.add_argument("--api-key", required=True, help="the app server's key (http.api_keys)")
    ap.add_argument("--other-api-key", default="",
                    help="a second http.api_keys key that did not mint the call (else that check is skipped)")
    ap.add_argument("--tool-timeout-s", type=float, default=1.0,
                    help="the transceiver's realtime.sideband.tool_timeout")
    ap.add_argument("--timeout-s", type=float, default=20.0, help="deadline for the channel to open")
    ap.add_argument("--hangup-deadline-s", type=float, default=10.0,
                    help="deadline for the browser's PeerConnection to leave connected after the hangup")
    args = ap.parse_args()
    aiortc_client.allow_loopback_candidates()
    result = {"url": args.url, "app_url": args.app_url or args.url}
    try:
        ok = asyncio.run(asyncio.wait_for(run(args, result), args.timeout_s + 40))
    except asyncio.TimeoutError:
        ok = False
        result["error"] = "watchdog: the whole run took too long"
    result["passed"] = bool(ok)
    print(json.dumps(result, indent=2, default=str), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
