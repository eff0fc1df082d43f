#!/usr/bin/python3
"""generate_tone.py — write the fake-microphone WAV for the browser end-to-end test.

Chromium's --use-file-for-fake-audio-capture plays this file as the microphone. Default:
10 s of 440 Hz at -12 dBFS, 48 kHz mono 16-bit PCM; --on-s/--off-s make it bursts (tone, then
silence, repeated) so a voice activity detector sees speech start and stop. Generated at test
time, never committed.
Standard library only (wave + math), so it runs wherever python3 does."""

import argparse
import math
import struct
import sys
import wave


def write_tone(path, hz, seconds, dbfs, rate, on_s=None, off_s=0.0):
    amplitude = 32767 * 10 ** (dbfs / 20.0)
    frames = int(seconds * rate)
    # A whole number of periods per file keeps the loop seamless when Chromium replays it.
    periods = max(1, round(hz * frames / rate))
    step = 2 * math.pi * periods / frames

    def gain(i):
        if on_s is None:
            return 1.0
        t = (i / rate) % (on_s + off_s)
        if t >= on_s:
            return 0.0
        # 5 ms ramps: a hard edge is a click, broadband energy the tone check would count as noise.
        return min(1.0, t / 0.005, (on_s - t) / 0.005)

    samples = struct.pack(f"<{frames}h", *(int(round(amplitude * gain(i) * math.sin(step * i))) for i in range(frames)))
    with wave.open(path, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="WAV file to write")
    ap.add_argument("--hz", type=float, default=440.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--dbfs", type=float, default=-12.0)
    ap.add_argument("--rate", type=int, default=48000)
    ap.add_argument("--on-s", type=float, default=None, help="bursts: seconds of tone per cycle")
    ap.add_argument("--off-s", type=float, default=0.0, help="bursts: seconds of silence per cycle")
    args = ap.parse_args()
    if not (0 < args.hz < args.rate / 2) or args.seconds <= 0 or args.dbfs > 0:
        ap.error("need 0 < hz < rate/2, seconds > 0, dbfs <= 0")
    if args.on_s is not None and (args.on_s < 0.05 or args.off_s < 0):
        ap.error("need --on-s >= 0.05 and --off-s >= 0")
    write_tone(args.out, args.hz, args.seconds, args.dbfs, args.rate, args.on_s, args.off_s)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
