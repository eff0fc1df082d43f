"""aiortc helpers shared by the aiortc clients (interop/aiortc_client.py,
e2e/chaos_aiortc_client.py, interop/aiortc_realtime_client.py, e2e/mock_transceiver.py) and the
benchmarks built on them. aiortc and aioice are imported inside the functions: the caller has
them (Debian's python3-aiortc, /usr/bin/python3)."""

import asyncio
import time


def allow_loopback_candidates():
    """aioice skips 127.0.0.1, so a host whose only interface is lo would gather no candidate."""
    import aioice.ice
    original = aioice.ice.get_host_addresses

    def with_loopback(use_ipv4, use_ipv6):
        addresses = original(use_ipv4, use_ipv6)
        if use_ipv4 and "127.0.0.1" not in addresses:
            addresses.append("127.0.0.1")
        return addresses

    aioice.ice.get_host_addresses = with_loopback


def host_has_non_loopback_ipv4():
    """Whether aioice gathers an IPv4 address other than 127.0.0.1 on this host."""
    import aioice.ice
    try:
        return any(a != "127.0.0.1" for a in aioice.ice.get_host_addresses(True, False))
    except Exception:
        return False


def record_connection(pc, result, connected, on_end=None):
    """Appends every connectionState of pc to result["states"]; the first "connected" stamps
    result["connected_at"] (time.monotonic()) and sets the event `connected`; "failed" and
    "closed" call on_end(state) when given."""
    @pc.on("connectionstatechange")
    def on_state():
        result.setdefault("states", []).append(pc.connectionState)
        if pc.connectionState == "connected" and "connected_at" not in result:
            result["connected_at"] = time.monotonic()
            connected.set()
        elif on_end and pc.connectionState in ("failed", "closed"):
            on_end(pc.connectionState)


def remote_audio(pc):
    """A future that resolves to the first remote audio track pc receives."""
    track_future = asyncio.get_running_loop().create_future()

    @pc.on("track")
    def on_track(track):
        if track.kind == "audio" and not track_future.done():
            track_future.set_result(track)
    return track_future


async def receive_frames(track, on_frame, wait_s=1.0, on_end=None, ends=None):
    """on_frame(frame) for every frame of track until it ends (`ends`, by default aiortc's
    MediaStreamError; then on_end()). No frame for wait_s (an outage, a relay restart) is not
    an end: it keeps listening until the call's end cancels it."""
    if ends is None:
        from aiortc.mediastreams import MediaStreamError
        ends = MediaStreamError
    while True:
        try:
            frame = await asyncio.wait_for(track.recv(), timeout=wait_s)
        except asyncio.TimeoutError:
            continue
        except ends:
            if on_end:
                on_end()
            return
        on_frame(frame)


def drain_remote_tracks(pc):
    """Consumes every remote track pc receives: unread audio stalls aiortc's jitter buffer."""
    @pc.on("track")
    def on_track(track):
        asyncio.ensure_future(receive_frames(track, lambda frame: None))
