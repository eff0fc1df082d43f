#!/usr/bin/python3
"""handover_bench.py — the media gap of a network handover against hanging up and calling again (issue 17 §3).

One run, six cases, each in one namespace topology with one headless Chromium page
(tests/transceiver/e2e/run_handover_netns.py driving ice_restart_e2e.mjs), the handover
repeated inside the one call (A -> B, B -> A, ... --moves times) rather than a fresh
topology per repetition:

  restart / relay    address change, then pc.restartIce() over PATCH, through the userspace relay
  restart / direct   the same, the client reaching the transceiver's own address (no relay)
  rebind  / relay    a NAT rebinding (the address changes on the wire), no signaling, relay
  rebind  / direct   the same, direct
  recall  / relay    no handover: hang up (pc.close() + DELETE) and POST a new session on the
  recall  / direct   same page and network, --moves times; the baseline of each path

Per repetition: the RTP gap (longest time between two increases of the page's inbound-rtp
packetsReceived, sampled every 20 ms; for a recall, the old call's last RTP to the new call's
first), the audio gap (received level below -45 dBFS; for a recall, last audible sample to the
first), the server's own path.gap (last authenticated packet on the old path to the first on the
new; handovers only) and, for a recall, the hang-up -> connected and hang-up -> first RTP times.
Printed: a Markdown table of p50/p99/min/max per case and the ratio of each handover case to the
recall of its path, with the machine described. p99 is nearest-rank: of 20 values, the largest.

Restarts are rate-limited per session (3 in a burst, then one per 10 s), so restart moves are
paced --restart-interval-s apart. The embedded echo's delay is set to --echo-delay (0ms):
with the default 500 ms every recall would wait half a second for its first echo.

Needs root (namespaces), chromium, node and playwright-core (npm ci in tests/golden/tools),
nft; exits 77 saying which is missing. Takes about 13 minutes with --moves 20. Usage:
  sudo bench/handover_bench.py [--transceiver-bin build/bin/rtcedge-transceiver]
       [--relay-bin build/bin/rtcedge-relay] [--moves 20] [--cases restart/relay,recall/relay,...]
       [--json-out FILE] [--markdown-out FILE]
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.abspath(os.path.join(HERE, ".."))
E2E = os.path.join(REPO_ROOT, "tests", "transceiver", "e2e")
RUNNER = os.path.join(E2E, "run_handover_netns.py")
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "support", "py"))
sys.path.insert(0, E2E)

import run_handover_netns as ho  # noqa: E402  (its prerequisites: the same)
from rtcetest import outcome  # noqa: E402
from rtcetest.core import log_to, machine_info as machine, stats, write_report  # noqa: E402

SKIP = outcome.SKIP
CASES = ["recall/relay", "restart/relay", "rebind/relay", "recall/direct", "restart/direct", "rebind/direct"]
RELAY_MODE = {"relay": "userspace", "direct": "none"}


log = log_to("handover_bench")


def run_case(args, case):
    variant, path = case.split("/")
    argv = [sys.executable, RUNNER, "--transceiver-bin", args.transceiver_bin, "--relay-bin", args.relay_bin,
            "--variant", variant, "--relay-mode", RELAY_MODE[path], "--echo-delay", args.echo_delay,
            "--chromium", args.chromium, "--node", args.node]
    if variant == "recall":
        argv += ["--recalls", str(args.moves)]
        driver_s = 60 + args.moves * 6
    else:
        interval = args.restart_interval_s if variant == "restart" else 0
        argv += ["--moves", str(args.moves), "--move-interval-s", str(interval)]
        driver_s = 60 + args.moves * (max(interval, 6) + 6)
    argv += ["--timeout-s", str(driver_s)]
    log("%s: %s" % (case, " ".join(argv)))
    t0 = time.monotonic()
    load_before = os.getloadavg()[0]
    try:
        proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=None if args.verbose else subprocess.PIPE,
                              timeout=driver_s + 120)
    except subprocess.TimeoutExpired:
        return {"case": case, "error": "timed out after %d s" % (driver_s + 120)}
    out = {"case": case, "exit": proc.returncode, "wall_s": round(time.monotonic() - t0, 1),
           "loadavg_1m": [round(load_before, 2), round(os.getloadavg()[0], 2)]}
    if proc.returncode == SKIP:
        out["error"] = "skipped: %s" % proc.stdout.decode("utf-8", "replace").strip()
        return out
    try:
        res = json.loads(proc.stdout.decode("utf-8", "replace"))
    except ValueError:
        out["error"] = "no JSON from the runner (exit %d): %s" % (
            proc.returncode, (proc.stderr or b"").decode("utf-8", "replace")[-1500:])
        return out
    client = res.get("client") or {}
    out["passed"] = res.get("passed")
    failed = [c for c in res.get("checks", []) + client.get("checks", []) if not c.get("ok")]
    out["failed_checks"] = [c["name"] for c in failed]
    out["failed_check_details"] = [{"name": c["name"], "detail": c.get("detail")} for c in failed]
    out["runner_error"] = res.get("error") or client.get("error")
    out["browser_version"] = client.get("browser_version")
    if variant == "recall":
        reps = client.get("recalls") or []
        out["reps"] = reps
        out["rtp_gap_ms"] = stats([r.get("rtp_gap_ms") for r in reps])
        out["audio_gap_ms"] = stats([r.get("audio_gap_ms") for r in reps])
        out["hangup_to_connected_ms"] = stats([r.get("hangup_to_connected_ms") for r in reps])
        out["hangup_to_first_rtp_ms"] = stats([r.get("hangup_to_first_rtp_ms") for r in reps])
        out["hangup_to_first_audio_ms"] = stats([r.get("hangup_to_first_audio_ms") for r in reps])
    else:
        reps = client.get("moves") or []
        out["reps"] = reps
        out["rtp_gap_ms"] = stats([m.get("rtp_gap_ms") for m in reps])
        out["audio_gap_ms"] = stats([m.get("audio_gap_ms") for m in reps])
        out["server_gap_ms"] = stats([m.get("server_gap_ms") for m in reps])
        if variant == "restart":
            out["restart_to_connected_ms"] = stats([(m.get("restart_timings_ms") or {}).get("connected_seen")
                                                    for m in reps])
    return out


def fmt(s, key):
    return "—" if not s else "%d" % round(s[key])


def ratio(a, b, key):
    if not a or not b or not b[key]:
        return "—"
    return "%.2f" % (a[key] / b[key])


def report(args, results, mach):
    by_case = {r["case"]: r for r in results}
    lines = []
    browser = next((r.get("browser_version") for r in results if r.get("browser_version")), "?")
    lines.append("Machine: %d CPUs (`nproc`), %s, kernel %s, Chromium %s; load average %s at the start, %s at the end "
                 "(shared with other jobs). %d repetitions per case in one call; echo delay %s."
                 % (mach["nproc"], mach["cpu"], mach["kernel"], browser, mach["loadavg"], machine()["loadavg"],
                    args.moves, args.echo_delay))
    lines.append("")
    lines.append("| case | path | n | RTP gap p50 | p99 | min | max | audio gap p50 | p99 | server gap p50 | p99 "
                 "| RTP gap / recall p50 | p99 |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case in [c for c in CASES if c in by_case]:
        r = by_case[case]
        variant, path = case.split("/")
        name = {"restart": "address change + ICE restart (PATCH)", "rebind": "NAT rebinding, no signaling",
                "recall": "hang up and call again"}[variant]
        if r.get("error"):
            lines.append("| %s | %s | 0 | %s |%s" % (name, path, r["error"], " |" * 9))
            continue
        g, a, sg = r.get("rtp_gap_ms"), r.get("audio_gap_ms"), r.get("server_gap_ms")
        base = (by_case.get("recall/" + path) or {}).get("rtp_gap_ms")
        is_base = variant == "recall"
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            name, path, g["n"] if g else 0, fmt(g, "p50"), fmt(g, "p99"), fmt(g, "min"), fmt(g, "max"),
            fmt(a, "p50"), fmt(a, "p99"), "—" if is_base else fmt(sg, "p50"), "—" if is_base else fmt(sg, "p99"),
            "1 (baseline)" if is_base else ratio(g, base, "p50"), "1" if is_base else ratio(g, base, "p99")))
    lines.append("")
    lines.append("Times in ms. Hang up and call again, from `pc.close()`:")
    lines.append("")
    lines.append("| path | n | to `connected` p50 | p99 | to first RTP p50 | p99 | to first audio p50 | p99 |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for path in ("relay", "direct"):
        r = by_case.get("recall/" + path)
        if not r or r.get("error"):
            continue
        c, f, fa = r.get("hangup_to_connected_ms"), r.get("hangup_to_first_rtp_ms"), r.get("hangup_to_first_audio_ms")
        lines.append("| %s | %s | %s | %s | %s | %s | %s | %s |" % (path, c["n"] if c else 0, fmt(c, "p50"),
                                                                 fmt(c, "p99"), fmt(f, "p50"), fmt(f, "p99"),
                                                                 fmt(fa, "p50"), fmt(fa, "p99")))
    restarts = [(p, by_case.get("restart/" + p)) for p in ("relay", "direct")]
    if any(r and r.get("restart_to_connected_ms") for _, r in restarts):
        lines.append("")
        lines.append("ICE restart: from `restartIce()` to the page seeing ICE connected on the new credentials "
                     "(ms): " + "; ".join("%s p50 %s, p99 %s" % (p, fmt(r["restart_to_connected_ms"], "p50"),
                                                                  fmt(r["restart_to_connected_ms"], "p99"))
                                          for p, r in restarts if r and r.get("restart_to_connected_ms")))
    bad = [r for r in results if r.get("error") or r.get("failed_checks") or r.get("runner_error")]
    if bad:
        lines.append("")
        for r in bad:
            lines.append("- %s: %s" % (r["case"], r.get("error") or "; ".join(
                filter(None, [r.get("runner_error")] + (r.get("failed_checks") or [])))))
    return "\n".join(lines) + "\n"


def main():
    build = os.path.join(REPO_ROOT, "build", "bin")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transceiver-bin", default=os.path.join(build, "rtcedge-transceiver"))
    ap.add_argument("--relay-bin", default=os.path.join(build, "rtcedge-relay"))
    ap.add_argument("--moves", type=int, default=20, help="repetitions per case (moves, or recalls)")
    ap.add_argument("--cases", default=",".join(CASES), help="comma-separated subset of " + ",".join(CASES))
    ap.add_argument("--restart-interval-s", type=float, default=10.5,
                    help="between two restart moves (the per-session limit refills one restart per 10 s)")
    ap.add_argument("--echo-delay", default="0ms", help="the transceiver's backend.echo_delay")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--node", default="node")
    ap.add_argument("--json-out")
    ap.add_argument("--markdown-out")
    ap.add_argument("--verbose", action="store_true", help="pass the runners' stderr through")
    args = ap.parse_args()
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown or not cases:
        ap.error("unknown case(s) %s; known: %s" % (unknown, ",".join(CASES)))
    if not 1 <= args.moves <= 100:
        ap.error("--moves must be 1..100")
    probe = argparse.Namespace(variant="rebind", relay_mode="userspace", chromium=args.chromium, node=args.node,
                               transceiver_bin=args.transceiver_bin, relay_bin=args.relay_bin)
    code = outcome.unmet(lambda: ho.prerequisites(probe))
    if code is not None:
        return code

    mach = machine()
    log("machine: %(nproc)d CPUs, %(cpu)s, kernel %(kernel)s, load average %(loadavg)s" % mach)
    results = []
    t0 = time.monotonic()
    for case in [c for c in CASES if c in cases]:
        r = run_case(args, case)
        results.append(r)
        g = r.get("rtp_gap_ms")
        log("%s: %s" % (case, r.get("error") or "RTP gap p50 %s p99 %s ms (n %s), %s s%s" % (
            fmt(g, "p50"), fmt(g, "p99"), g["n"] if g else 0, r.get("wall_s"),
            "" if not r.get("failed_checks") else ", failed: %s" % r["failed_checks"])))
    table = report(args, results, mach)
    write_report(table, args.markdown_out, args.json_out,
                 {"machine": mach, "moves": args.moves, "echo_delay": args.echo_delay,
                  "total_s": round(time.monotonic() - t0, 1), "results": results})
    complete = all(not r.get("error") and r.get("rtp_gap_ms") and r["rtp_gap_ms"]["n"] == args.moves for r in results)
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
