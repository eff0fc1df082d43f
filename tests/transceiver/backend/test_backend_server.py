#!/usr/bin/env python3
"""Test backends for the transceiver's WebSocket client, over ws:// or wss:// (--cert/--key).

--dialect rtcedge: echoes binary frames (as examples/python_backend does) and answers some
text events, so a test can see what the backend heard in the session's event log:
session.started -> {"type":"event","heard":"session.started","metadata":<its metadata>};
telephony.dtmf -> {"type":"event","heard":"dtmf","digit":<digit>}, and for digit "#" then also
{"type":"clear"} (a barge-in), for digit "0" {"type":"session.end"} (the agent hangs up); telephony.mark -> {"type":"event","heard":"mark","name":<name>}.
Other text (and text that is not a JSON object) is ignored.
--dialect realtime: a small Realtime-protocol server. It requires session.update first
(anything else before it is answered with an error and remembered), answers it with
session.updated, and echoes every input_audio_buffer.append back as
response.output_audio.delta (same base64 PCM16 24 kHz). Client event {"type":"test.barge_in"}
gets input_audio_buffer.speech_started; {"type":"test.report"} gets a test.report event
with what the server saw (first event type, appends, bytes, the Authorization header).

Prints "listening on ws[s]://127.0.0.1:<port>/" first (tests read that line). Needs
python3-websockets (Debian 12: 10.4)."""
import argparse, asyncio, base64, json, ssl, sys
import websockets


async def rtcedge(ws):
    async for message in ws:
        if isinstance(message, bytes):
            await ws.send(message)
            continue
        try:
            event = json.loads(message)
        except ValueError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "session.started":
            await ws.send(json.dumps({"type": "event", "heard": "session.started",
                                      "metadata": event.get("metadata", {})}))
        elif kind == "telephony.dtmf":
            digit = event.get("digit")
            await ws.send(json.dumps({"type": "event", "heard": "dtmf", "digit": digit}))
            if digit == "#":
                await ws.send(json.dumps({"type": "clear"}))
            elif digit == "0":
                await ws.send(json.dumps({"type": "session.end", "reason": "the caller pressed 0"}))
        elif kind == "telephony.mark":
            await ws.send(json.dumps({"type": "event", "heard": "mark", "name": event.get("name")}))


async def realtime(ws):
    seen = {"first": None, "appends": 0, "bytes": 0, "bad_appends": 0,
            "authorization": ws.request_headers.get("Authorization", "")}
    events = 0
    async for message in ws:
        if isinstance(message, bytes):
            await ws.send(json.dumps({"type": "error", "error": {"type": "invalid_request_error",
                                                                 "code": "binary", "message": "binary frame"}}))
            continue
        event = json.loads(message)
        kind = event.get("type")
        events += 1
        if seen["first"] is None:
            seen["first"] = kind
            seen["first_session"] = event.get("session")
        if kind == "session.update":
            await ws.send(json.dumps({"type": "session.updated", "event_id": f"ev_{events}",
                                      "session": event.get("session", {})}))
        elif kind == "input_audio_buffer.append":
            try:
                pcm = base64.b64decode(event["audio"], validate=True)
            except Exception:
                seen["bad_appends"] += 1
                continue
            seen["appends"] += 1
            seen["bytes"] += len(pcm)
            await ws.send(json.dumps({"type": "response.output_audio.delta", "event_id": f"ev_{events}",
                                      "response_id": "resp_1", "item_id": "item_1", "output_index": 0,
                                      "content_index": 0, "delta": event["audio"]}))
        elif kind == "test.barge_in":
            await ws.send(json.dumps({"type": "input_audio_buffer.speech_started", "event_id": f"ev_{events}",
                                      "audio_start_ms": 100, "item_id": "item_2"}))
        elif kind == "test.report":
            await ws.send(json.dumps({"type": "test.report", **seen}))
        else:
            await ws.send(json.dumps({"type": "error", "event_id": f"ev_{events}",
                                      "error": {"type": "invalid_request_error", "code": "unknown_event",
                                                "message": f"unknown event {kind}", "event_id": event.get("event_id")}}))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dialect", choices=["rtcedge", "realtime"], default="rtcedge")
    parser.add_argument("--cert", help="PEM certificate chain: serve wss://")
    parser.add_argument("--key", help="PEM private key of --cert")
    args = parser.parse_args()
    context = None
    if args.cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.cert, args.key)
    handler = realtime if args.dialect == "realtime" else rtcedge

    async def session(ws, _path=None):
        try:
            await handler(ws)
        except websockets.ConnectionClosed:
            pass

    async with websockets.serve(session, "127.0.0.1", 0, ssl=context, max_size=1 << 20) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"listening on {'wss' if context else 'ws'}://127.0.0.1:{port}/", flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
