#!/usr/bin/python3
"""Print an SDP offer from aiortc (Debian's python3-aiortc) with one audio track.

Usage: /usr/bin/python3 aiortc_offer.py > ../fixtures/aiortc_audio_offer.sdp
No network traffic: the offer is made and the peer connection closed; gathering only
enumerates local interfaces.
"""
import asyncio
from aiortc import RTCPeerConnection
from aiortc.mediastreams import AudioStreamTrack
async def main():
    pc = RTCPeerConnection()
    pc.addTrack(AudioStreamTrack())
    await pc.setLocalDescription(await pc.createOffer())
    import sys; sys.stdout.write(pc.localDescription.sdp)
    await pc.close()
asyncio.run(main())
