#!/usr/bin/python3
"""generate_tone.py — write the fake-microphone WAV for the browser end-to-end test.

Chromium's --use-file-for-fake-audio-capture plays this file as the microphone. Default:
10 s of 440 Hz at -12 dBFS, 48 kHz mono 16-bit PCM. Generated at test time, never committed.
Standard library only (wave + math), so it runs wherever python3 does."""

import argparse
import math
import struct
import sys
import wave


def write_tone(path, hz, seconds, dbfs, rate):
    amplitude = 32767 * 10 ** (dbfs / 20.0)
    frames = int(seconds * rate)
    # A whole number of periods per file keeps the loop seamless when Chromium replays it.
    periods = max(1, round(hz * frames / rate))
    step = 2 * math.pi * periods / frames
    samples = struct.pack(f"<{frames}h", *(int(round(amplitude * math.sin(step * i))) for i in range(frames)))
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
    args = ap.parse_args()
    if not (0 < args.hz < args.rate / 2) or args.seconds <= 0 or args.dbfs > 0:
        ap.error("need 0 < hz < rate/2, seconds > 0, dbfs <= 0")
    write_tone(args.out, args.hz, args.seconds, args.dbfs, args.rate)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
