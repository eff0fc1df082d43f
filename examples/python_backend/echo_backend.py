#!/usr/bin/env python3
"""A complete rtcedge backend in ~50 lines: echoes the caller's audio (optionally louder or
quieter), logs every event, and sends a barge-in `clear` on {"type": "demo.clear"}.
Protocol: docs/backend-protocol.md. Needs python3-websockets (Debian 12: 10.4)."""
import argparse, array, asyncio, json, logging, sys
import websockets

log = logging.getLogger("echo_backend")


def scale(frame: bytes, gain: float) -> bytes:
    if gain == 1.0:
        return frame
    samples = array.array("h", frame)  # PCM16LE mono (this host is little-endian)
    for i, s in enumerate(samples):
        samples[i] = max(-32768, min(32767, int(s * gain)))
    return samples.tobytes()


async def session(ws, gain: float) -> None:
    log.info("connected: %s", ws.path)
    encoding = "pcm_s16le"
    async for message in ws:
        if isinstance(message, bytes):  # one 20 ms frame (or an Opus packet)
            await ws.send(scale(message, gain) if encoding == "pcm_s16le" else message)
            continue
        event = json.loads(message)
        log.info("event: %s", message)
        if event.get("type") == "session.started":
            encoding = event.get("encoding", "pcm_s16le")
        elif event.get("type") == "demo.clear":
            await ws.send(json.dumps({"type": "clear"}))
        elif event.get("type") == "session.ended":
            break
    log.info("session over")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--gain", type=float, default=1.0, help="volume change of the echo")
    args = parser.parse_args()
    async with websockets.serve(lambda ws: session(ws, args.gain), args.host, args.port) as server:
        port = server.sockets[0].getsockname()[1]
        print(f"listening on ws://{args.host}:{port}/", flush=True)  # tests read this line
        await asyncio.Future()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(message)s")
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
