#!/usr/bin/python3
"""chaos_bench.py — the longer chaos runs (issue 16 §2) behind docs/benchmarks.md "Network
impairment" and docs/security.md (Chaos).

Owns nothing but the repetition and the tables: each run is one
tests/transceiver/e2e/run_chaos_netns.py (real rtcedge-relay, rtcedge-transceiver, aiortc
clients and, for kill, redis-server, in network namespaces), whose checks must pass.
  impairment  every impairment (none = the clean baseline of the same run, loss 1/5/10 %,
              jitter 30 ms, reordering, duplication), --seconds each, --runs times; the
              table gives per impairment the median over runs of each figure.
  kill        --runs SIGKILLs of one of two transceivers: p50/p99/max of the relay dropping
              the endpoint, of the killed sessions' clients seeing the end, and of the
              survivors' frames lost across the kill.
  redis-outage  Redis down for --outage seconds (default 600: the 10-minute soak, issue 28
              §3), --runs times: redis-server SIGKILLed under established sessions, a new
              session a second, a transceiver drained and the relay restarted from its
              registry cache mid-outage, then Redis back empty; the tables give the
              established sessions' audio, the new sessions' connect times, the health
              polls, the convergence times and Redis's load after its return.
  redis-failover  a Redis master SIGKILLed mid-call under Sentinel and under Cluster (there,
              then a slot range holding a live flow key migrated), --runs times each
              (--topologies): established sessions' audio across the events, new sessions'
              connect times, kill -> promoted, kill -> a flow written after the kill readable,
              and a relay SIGKILLed and restarted after the failover: SIGKILL -> every
              established session echoes again, rtcedge_relay_flows_recovered_total.
Needs root. Usage:
  sudo bench/chaos_bench.py --build build impairment [--seconds 30] [--runs 3]
  sudo bench/chaos_bench.py --build build impairment --impair-with nft --impairments none,loss1,loss5,loss10,duplicate
  sudo bench/chaos_bench.py --build build kill [--runs 10]
  sudo bench/chaos_bench.py --build build redis-outage [--outage 600] [--runs 1]
  sudo bench/chaos_bench.py --build build redis-failover [--runs 5] [--topologies sentinel,cluster]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, "..", "tests", "transceiver", "e2e", "run_chaos_netns.py")
sys.path.insert(0, os.path.join(HERE, "..", "tests", "support", "py"))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "transceiver", "e2e"))
from rtcetest.core import machine  # noqa: E402
import chaos_outage  # noqa: E402  (its tables; run_chaos_netns.py runs the scenario)
ORDER = ["none", "loss1", "loss5", "loss10", "jitter30", "reorder", "duplicate"]


def percentile(values, p):
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, int(round(p / 100.0 * (len(ordered) - 1)))))
    return ordered[k]


def run_once(args, extra, timeout=900):
    cmd = ["/usr/bin/python3", RUNNER, "--transceiver-bin", os.path.join(args.build, "bin", "rtcedge-transceiver"),
           "--relay-bin", os.path.join(args.build, "bin", "rtcedge-relay")] + extra
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if r.returncode == 77:  # rtcetest.outcome.SKIP
        sys.exit("skipped: " + r.stdout.strip())
    try:
        out = json.loads(r.stdout)
    except ValueError:
        sys.exit("run_chaos_netns.py printed no JSON (exit %d):\n%s" % (r.returncode, r.stderr[-3000:]))
    failed = [c["name"] for c in out.get("checks", []) if not c["ok"]]
    if r.returncode != 0:
        print("run failed (exit %d): %s %s" % (r.returncode, failed, out.get("error")), file=sys.stderr)
    return out, r.returncode == 0


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def bench_impairment(args):
    rows = {}
    passed = 0
    impair_with = None
    for i in range(args.runs):
        out, ok = run_once(args, ["--scenario", "impairment", "--impairments", args.impairments,
                                  "--seconds", str(args.seconds), "--parallel", str(args.parallel),
                                  "--impair-with", args.impair_with])
        passed += ok
        impair_with = out.get("impair_with")
        for t in out.get("impairments", []):
            rows.setdefault(t["impairment"], []).append(t)
        print("run %d/%d: %s" % (i + 1, args.runs, "pass" if ok else "FAIL"), file=sys.stderr, flush=True)
    print("\nNetwork impairment on the client's uplink, %d run(s) x %g s per impairment (median over runs), "
          "impairment by %s; aiortc 1.4 client (no in-band FEC), echo backend, userspace relay; %d session(s) side by "
          "side; checks passed in %d of %d runs" % (args.runs, args.seconds, impair_with, args.parallel, passed,
                                                   args.runs))
    print("machine: %s\n" % machine())
    print("| impairment | jb lost /s | jb concealed /s | jb fec_recovered /s | jb reordered /s | jb late /s "
          "| RTCP loss "
          "| echo frames received | frames with the tone | tone SNR (dB) | max gap (ms) | session up |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in ORDER:
        rs = rows.get(name, [])
        if not rs:
            continue

        def per_s(outcome):
            return med([(r["jitter_buffer"] or {}).get(outcome, 0) / r["window_s"] for r in rs if r.get("window_s")])

        def fmt(v, spec="%.1f"):
            return "-" if v is None else spec % v

        recv = med([r["echo_frames"] / r["echo_frames_expected"] for r in rs if r.get("echo_frames_expected")])
        print("| %s (`%s`) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %d/%d |" % (
            name, rs[0]["model"], fmt(per_s("lost")), fmt(per_s("concealed")), fmt(per_s("fec_recovered")),
            fmt(per_s("reordered")), fmt(per_s("late")), fmt(med([r.get("rtcp_loss") for r in rs]), "%.3f"),
            fmt(recv and recv * 100, "%.1f %%"), fmt(med([r.get("tone_fraction") for r in rs]) * 100, "%.1f %%"),
            fmt(med([r.get("tone_snr_db") for r in rs])), fmt(med([r.get("max_gap_ms") for r in rs]), "%.0f"),
            sum(1 for r in rs if r.get("state_before_delete") == "connected"), len(rs)))
    return 0 if passed == args.runs else 1


def bench_kill(args):
    left, ended, lost, gap, ref = [], [], [], [], []
    passed = 0
    for i in range(args.runs):
        out, ok = run_once(args, ["--scenario", "kill"])
        passed += ok
        if out.get("relay_endpoint_left_after_s") is not None:
            left.append(out["relay_endpoint_left_after_s"] * 1000)
        for s in out.get("sessions", []):
            if s["transceiver"] == "a":
                lost.append(s.get("frames_lost_across_kill", 0))
                gap.append(s.get("max_gap_ms_in_kill_window") or 0)
                if s.get("frames_in_reference_window") is not None:
                    ref.append(200 - s["frames_in_reference_window"])
            elif s.get("client_end_after_kill_s") is not None:
                ended.append(s["client_end_after_kill_s"] * 1000)
        print("run %d/%d: %s" % (i + 1, args.runs, "pass" if ok else "FAIL"), file=sys.stderr, flush=True)
    print("\nSIGKILL of one of two transceivers, %d runs (registry.ttl 1 s, sessions.consent_timeout 3 s, client "
          "consent shortened to match, 2 aiortc sessions on each transceiver); checks passed in %d of %d runs"
          % (args.runs, passed, args.runs))
    print("machine: %s\n" % machine())
    print("| measure | p50 | p99 | max | samples |")
    print("|---|---|---|---|---|")
    for label, vals, unit in (("kill -> relay dropped the endpoint (ms)", left, ""),
                              ("kill -> killed session's client saw the end (ms)", ended, ""),
                              ("survivor: echo frames lost in [kill-1s, kill+3s] (of 200)", lost, ""),
                              ("survivor: longest echo gap in that window (ms)", gap, ""),
                              ("survivor: frames lost in [kill+3s, kill+7s] (reference, of 200)", ref, "")):
        if vals:
            print("| %s | %.0f | %.0f | %.0f | %d |" % (label, percentile(vals, 50), percentile(vals, 99),
                                                       max(vals), len(vals)))
    return 0 if passed == args.runs else 1


def bench_redis_outage(args):
    runs = []
    for i in range(args.runs):
        out, ok = run_once(args, ["--scenario", "redis-outage", "--outage", "%g" % args.outage],
                           timeout=args.outage + 600)
        runs.append((out, ok))
        failed = [c["name"] for c in out.get("checks", []) if not c["ok"]]
        print("run %d/%d: %s%s" % (i + 1, args.runs, "pass" if ok else "FAIL", "" if ok else ": %s" % failed),
              file=sys.stderr, flush=True)
    passed = sum(ok for _, ok in runs)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump([out for out, _ in runs], f, indent=2)
    print("\nRedis down for %g s (SIGKILL, back empty), %d run(s); userspace relay with registry + flow store + "
          "registry.cache_file, two transceivers, 2 established aiortc sessions each, a new session a second, "
          "transceiver b drained at 30 %% and the relay restarted at 50 %% of the outage; checks passed in %d of %d "
          "runs" % (args.outage, args.runs, passed, args.runs))
    print("machine: %s\n" % machine())
    for n, (out, ok) in enumerate(runs):
        if args.runs > 1:
            print("\n### run %d (%s)\n" % (n + 1, "pass" if ok else "FAIL"))
        chaos_outage.print_outage_tables(out)
    return 0 if passed == args.runs else 1


def bench_redis_failover(args):
    status = 0
    print("\nRedis master SIGKILLed mid-call, %d run(s) per topology; userspace relay with registry + flow store + "
          "registry.cache_file, two transceivers, 2 established aiortc sessions each, a new session a second; "
          "the relay SIGKILLed and restarted (cache kept) 8 s after the kill (Cluster: again after a 3-slot "
          "migration of a live flow key's slots)" % args.runs)
    print("machine: %s" % machine())
    for topo in args.topologies.split(","):
        runs = []
        for i in range(args.runs):
            out, ok = run_once(args, ["--scenario", "redis-failover", "--topology", topo], timeout=400)
            runs.append((out, ok))
            failed = [c["name"] for c in out.get("checks", []) if not c["ok"]]
            print("%s run %d/%d: %s%s" % (topo, i + 1, args.runs, "pass" if ok else "FAIL",
                                          "" if ok else ": %s" % failed), file=sys.stderr, flush=True)
        passed = sum(ok for _, ok in runs)
        status |= passed != args.runs
        vals = {}

        def add(label, v):
            if v is not None:
                vals.setdefault(label, []).append(v)

        for out, _ in runs:
            fo, ns = out.get("failover", {}), out.get("new_sessions", {})
            add("kill -> replica promoted (s)", fo.get("promoted_s"))
            add("kill -> a flow written after the kill readable in Redis (s)", fo.get("new_flow_readable_s"))
            add("kill -> a flow written after the kill in the killed master's slots readable (s)",
                fo.get("new_flow_in_killed_slots_readable_s"))
            for s in out.get("sessions", []):
                for ev, f in s.get("events", {}).items():
                    add("established: echo frames lost around %s (of ~250)" % ev, f["lost"])
                    add("established: longest echo gap around %s (ms)" % ev, f["max_gap_ms"])
                add("established: longest echo gap over the run, relay restarts aside (ms)",
                    s["run_without_restarts"]["max_gap_ms"])
            for ms in ns.get("connect_ms_by_start_s", []):
                add("new session connect (ms)", ms[1])
            add("new sessions that failed (per run)", ns.get("started", 0) - ns.get("ok", 0)
                + ns.get("planned", 0) - ns.get("started", 0))
            for r in out.get("relay_restarts", []):
                add("%s: SIGKILL -> every established session echoes again (s)" % r["label"],
                    r.get("every_session_echoes_again_s"))
                add("%s: rtcedge_relay_flows_recovered_total" % r["label"], r.get("flows_recovered_total"))
            if out.get("migration"):
                add("migration of 3 slots under calls (s)", out["migration"].get("took_s"))
        print("\n### %s: checks passed in %d of %d runs\n" % (topo, passed, args.runs))
        print("| measure | p50 | p99 | max | samples |")
        print("|---|---|---|---|---|")
        for label, vs in vals.items():
            print("| %s | %g | %g | %g | %d |" % (label, percentile(vs, 50), percentile(vs, 99), max(vs), len(vs)))
        if args.json_out:
            with open("%s.%s.json" % (args.json_out, topo), "w") as f:
                json.dump([out for out, _ in runs], f, indent=2)
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="the build tree (bin/rtcedge-relay, bin/rtcedge-transceiver)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=30.0, help="impairment: seconds per impairment")
    ap.add_argument("--parallel", type=int, default=1,
                    help="impairment: sessions side by side (1: one at a time, so that the Python clients do "
                         "not starve each other on a small machine)")
    ap.add_argument("--impairments", default=",".join(ORDER), help="impairment: which (run_chaos_netns.py names)")
    ap.add_argument("--impair-with", choices=["auto", "netem", "shim", "nft"], default="auto",
                    help="impairment: auto = tc netem if the kernel has it, else the client-side model; nft = loss "
                         "and duplication in the kernel (a cross-check)")
    ap.add_argument("--json-out", help="redis-outage: write every run's JSON summary here (redis-failover: "
                    "<this>.<topology>.json)")
    ap.add_argument("--topologies", default="sentinel,cluster", help="redis-failover: which, comma-separated")
    ap.add_argument("--outage", type=float, default=600.0, help="redis-outage: seconds Redis stays down")
    ap.add_argument("scenario", choices=["impairment", "kill", "redis-outage", "redis-failover"])
    args = ap.parse_args()
    if args.scenario == "redis-outage":
        if "--runs" not in sys.argv:
            args.runs = 1  # one 10-minute soak unless asked
        if not (1 <= args.runs <= 20 and 20 <= args.outage <= 3600):
            ap.error("redis-outage: --runs 1..20, --outage 20..3600")
        return bench_redis_outage(args)
    if args.scenario == "redis-failover":
        if not (1 <= args.runs <= 50 and set(args.topologies.split(",")) <= {"sentinel", "cluster"}):
            ap.error("redis-failover: --runs 1..50, --topologies of sentinel,cluster")
        return bench_redis_failover(args)
    if not (1 <= args.runs <= 100 and 5 <= args.seconds <= 300):
        ap.error("--runs 1..100, --seconds 5..300")
    return bench_impairment(args) if args.scenario == "impairment" else bench_kill(args)


if __name__ == "__main__":
    sys.exit(main())
