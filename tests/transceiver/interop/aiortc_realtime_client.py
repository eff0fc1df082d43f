#!/usr/bin/python3
"""aiortc_realtime_client.py — a Realtime-style call from a second WebRTC stack (aiortc, with
its own SCTP) against an rtcedge transceiver: ephemeral key, POST /v1/realtime/calls with a
raw SDP offer that has no candidates, the `oai-events` data channel, and the events.

  /usr/bin/python3 aiortc_realtime_client.py --url http://127.0.0.1:8080 [--api-key K]

The transceiver must run the embedded echo backend in parrot mode. Checked, each step with
its own deadline:
  - client_secrets mints an ek_ key; the call is created with it (201, Location .../rtc_<id>);
  - the channel opens; session.created arrives first, with a string event_id and a session;
  - session.update (the agents SDK's first update) gets session.updated; every server event
    has a string event_id;
  - malformed JSON and an unknown event type each get an error event naming them, and the
    channel stays open (the next event is still answered);
  - a text turn (conversation.item.create + response.create) gets a response.done;
  - a tone burst then silence on the microphone gives input_audio_buffer.speech_started and
    speech_stopped, and the replay is framed by output_audio_buffer.started/stopped;
  - hangup answers 200 and ends the session.
Prints one JSON result. Exit 0 pass, 1 fail, 2 bad usage, 77 aiortc missing.
"""

import argparse
import asyncio
import json
import os
import sys
import time
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "support", "py"))
sys.path.insert(0, HERE)

try:
    from aiortc import RTCPeerConnection, RTCSessionDescription

    import aiortc_client
    from rtcetest.aio import drain_remote_tracks
except ImportError as e:  # pragma: no cover - scripts/install-deps.sh installs python3-aiortc
    print(f"FAIL: setup: {e}", flush=True)
    sys.exit(1)

SAMPLE_RATE = aiortc_client.SAMPLE_RATE
FRAME_SAMPLES = aiortc_client.FRAME_SAMPLES

# The first session.update @openai/agents-realtime 0.20.0 sends on channel open.
AGENTS_SDK_FIRST_UPDATE = {
    "type": "session.update",
    "session": {
        "type": "realtime",
        "model": "gpt-realtime",
        "instructions": "You are a helpful assistant.",
        "output_modalities": ["audio"],
        "audio": {
            "input": {
                "format": {"type": "audio/pcm", "rate": 24000},
                "noise_reduction": None,
                "transcription": {"model": "gpt-4o-mini-transcribe"},
                "turn_detection": {"type": "semantic_vad"},
            },
            "output": {"format": {"type": "audio/pcm", "rate": 24000}, "voice": "alloy", "speed": 1},
        },
        "tools": [],
        "tracing": "auto",
    },
}


class BurstToneTrack(aiortc_client.ToneTrack):
    """A tone for `burst_s`, then silence: the VAD hears speech start and stop."""

    def __init__(self, hz, dbfs, burst_s):
        super().__init__(hz, dbfs)
        self._burst_samples = int(burst_s * SAMPLE_RATE)

    async def recv(self):
        frame = await super().recv()
        if frame.pts >= self._burst_samples:
            for plane in frame.planes:
                plane.update(bytes(plane.buffer_size))
        return frame


class Events:
    """Every message the server sent on oai-events, and waits on them with deadlines."""

    def __init__(self):
        self.items = []
        self.changed = asyncio.Event()

    def add(self, message):
        try:
            event = json.loads(message) if isinstance(message, str) else {"binary": len(message)}
        except ValueError:
            event = {"unparsable": message[:200]}
        self.items.append(event)
        self.changed.set()

    async def wait_for(self, predicate, timeout_s, start=0):
        deadline = time.monotonic() + timeout_s
        while True:
            for index in range(start, len(self.items)):
                if predicate(self.items[index]):
                    return index, self.items[index]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None, None
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except asyncio.TimeoutError:
                pass


def of_type(name):
    return lambda e: e.get("type") == name


async def run(args, result):
    pc = RTCPeerConnection()
    events = Events()
    opened = asyncio.Event()
    connected = asyncio.Event()
    call_url = None

    def fail(message):
        result["error"] = message
        return False

    @pc.on("connectionstatechange")
    def on_state():
        result.setdefault("states", []).append(pc.connectionState)
        if pc.connectionState == "connected":
            connected.set()

    drain_remote_tracks(pc)  # the remote audio must be consumed or aiortc's jitter buffer stalls

    channel = pc.createDataChannel("oai-events")
    channel.on("open", opened.set)
    channel.on("message", events.add)
    try:
        # 1. An ephemeral key from the server key, as an app backend mints it.
        body = json.dumps({"expires_after": {"anchor": "created_at", "seconds": 600},
                           "session": {"type": "realtime", "instructions": "aiortc realtime test"}}).encode()
        status, _, raw = await aiortc_client.http("POST", f"{args.url}/v1/realtime/client_secrets", args.api_key,
                                                  body=body, content_type="application/json")
        if status != 200:
            return fail(f"client_secrets: HTTP {status}: {raw[:300]!r}")
        key = json.loads(raw)
        if not str(key.get("value", "")).startswith("ek_"):
            return fail(f"client_secrets: no ek_ value in {key}")
        result["ephemeral_key_expires_at"] = key.get("expires_at")

        # 2. The offer right after setLocalDescription: no candidate lines (the agents SDK's habit).
        pc.addTransceiver(BurstToneTrack(args.tone_hz, -12.0, args.burst_s), direction="sendrecv")
        await asyncio.wait_for(pc.setLocalDescription(await pc.createOffer()), 10)
        offer = "".join(line for line in pc.localDescription.sdp.splitlines(keepends=True)
                        if not line.startswith(("a=candidate:", "a=end-of-candidates")))
        t0 = time.monotonic()
        status, headers, raw = await aiortc_client.http("POST", f"{args.url}/v1/realtime/calls", key["value"],
                                                        body=offer.encode(), content_type="application/sdp")
        if status != 201:
            return fail(f"POST /v1/realtime/calls: HTTP {status}: {raw[:300]!r}")
        location = next((v for k, v in headers.items() if k.lower() == "location"), "")
        call_id = location.rstrip("/").rsplit("/", 1)[-1]
        result["call_id"] = call_id
        if not call_id.startswith("rtc_"):
            return fail(f"Location {location!r} does not end in rtc_<id>")
        call_url = urllib.parse.urljoin(args.url + "/", location)
        answer = raw.decode()
        # aiortc offers the older "DTLS/SCTP 5000" + a=sctpmap form; browsers a=sctp-port.
        if "m=application" not in answer or not ("a=sctp-port:" in answer or "a=sctpmap:" in answer):
            return fail("the answer does not accept the data channel section")
        await asyncio.wait_for(pc.setRemoteDescription(RTCSessionDescription(answer, "answer")), 10)

        # 3. The channel opens and the server speaks first.
        try:
            await asyncio.wait_for(opened.wait(), args.timeout_s)
        except asyncio.TimeoutError:
            return fail(f"oai-events not open after {args.timeout_s} s (states {result.get('states')})")
        result["channel_open_ms"] = round((time.monotonic() - t0) * 1000)
        index, created = await events.wait_for(lambda e: True, 5)
        if created is None or created.get("type") != "session.created":
            return fail(f"first event is not session.created: {created}")
        if not isinstance(created.get("event_id"), str) or not isinstance(created.get("session"), dict):
            return fail(f"session.created lacks event_id or session: {created}")
        result["session_created_instructions"] = created["session"].get("instructions")

        # 4. session.update -> session.updated (unsupported fields, if any, in an error after it).
        channel.send(json.dumps(dict(AGENTS_SDK_FIRST_UPDATE, event_id="client_update_1")))
        index, updated = await events.wait_for(of_type("session.updated"), 5)
        if updated is None:
            return fail("no session.updated after session.update")
        result["session_updated_model"] = updated.get("session", {}).get("model")

        # 5. Hostile messages get error events; the channel stays open.
        mark = len(events.items)
        channel.send("{this is not json")
        _, bad_json = await events.wait_for(of_type("error"), 5, start=mark)
        if bad_json is None:
            return fail("malformed JSON got no error event")
        mark = len(events.items)
        channel.send(json.dumps({"type": "no.such.event", "event_id": "client_unknown_1"}))
        _, unknown = await events.wait_for(
            lambda e: e.get("type") == "error" and e.get("error", {}).get("event_id") == "client_unknown_1", 5,
            start=mark)
        if unknown is None:
            return fail("an unknown event type got no error event naming its event_id")
        result["error_codes"] = [bad_json.get("error", {}).get("code"), unknown.get("error", {}).get("code")]

        # 6. A text turn reaches the backend and its response comes back.
        mark = len(events.items)
        channel.send(json.dumps({"type": "conversation.item.create", "event_id": "client_item_1",
                                 "item": {"type": "message", "role": "user",
                                          "content": [{"type": "input_text", "text": "hello rtcedge"}]}}))
        channel.send(json.dumps({"type": "response.create", "event_id": "client_response_1"}))
        sent_at = time.monotonic()
        _, done = await events.wait_for(of_type("response.done"), 5, start=mark)
        if done is None:
            return fail("no response.done for a text turn")
        result["text_turn_round_trip_ms"] = round((time.monotonic() - sent_at) * 1000, 1)

        # 7. Speech: the burst on the microphone, then its replay as a response.
        for name in ("input_audio_buffer.speech_started", "input_audio_buffer.speech_stopped",
                     "output_audio_buffer.started", "output_audio_buffer.stopped"):
            _, event = await events.wait_for(of_type(name), args.burst_s + 8)
            if event is None:
                return fail(f"no {name} (events: {[e.get('type') for e in events.items]})")
        _, started = await events.wait_for(of_type("input_audio_buffer.speech_started"), 0)
        _, stopped = await events.wait_for(of_type("input_audio_buffer.speech_stopped"), 0)
        result["speech_ms"] = [started.get("audio_start_ms"), stopped.get("audio_end_ms")]

        missing = [e.get("type") for e in events.items if not isinstance(e.get("event_id"), str)]
        if missing:
            return fail(f"server events without a string event_id: {missing}")

        # 8. Hang up.
        status, _, raw = await aiortc_client.http("POST", f"{call_url}/hangup", args.api_key, body=b"")
        result["hangup_status"] = status
        if status != 200:
            return fail(f"hangup: HTTP {status}: {raw[:200]!r}")
        result["event_types"] = sorted({e.get("type", "?") for e in events.items})
        return True
    finally:
        result["events_received"] = len(events.items)
        await asyncio.wait_for(pc.close(), 5)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", required=True, help="the transceiver's signaling base URL")
    ap.add_argument("--api-key", default="", help="a server API key (http.api_keys), if the server has any")
    ap.add_argument("--tone-hz", type=float, default=440.0)
    ap.add_argument("--burst-s", type=float, default=1.5, help="tone length before silence")
    ap.add_argument("--timeout-s", type=float, default=20.0, help="deadline for the channel to open")
    args = ap.parse_args()
    aiortc_client.allow_loopback_candidates()
    result = {"url": args.url}
    try:
        ok = asyncio.run(asyncio.wait_for(run(args, result), args.timeout_s + args.burst_s + 40))
    except asyncio.TimeoutError:
        ok = False
        result["error"] = "watchdog: the whole run took too long"
    result["passed"] = bool(ok)
    print(json.dumps(result, indent=2), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
