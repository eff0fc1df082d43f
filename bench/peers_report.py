#!/usr/bin/env python3
"""peers_report.py — the Markdown tables of bench/run_peers_bench.sh, from its results folder:
machine.txt, points.tsv (client, target, N, round, label per point), <label>.json (the
client's summary, with the measured server's "server" block) and <label>.perf-sym.txt
(`perf report --sort sym` of the server over the window).

Per point: CPU per session-second = server utime+stime over the window / (sessions connected
x window seconds); scheduler shares = share of the server's cpu-clock samples in the symbols
below (summarize_perf_script says how); wake-ups/s per worker thread = (voluntary + nonvoluntary context switches) / window
of the worker threads (rtce-media-N, rtce-floor-0; Pion has no worker thread of its own: the
mean over the Go runtime's threads); RSS per session = (VmRSS at the window's end - VmRSS
of the idle process) / sessions connected. With several rounds each figure is the median.

  peers_report.py --out DIR               every table
  peers_report.py --out DIR --line LABEL  one point, one line (progress while it runs)
  perf script -F ip,sym,dso | peers_report.py --out DIR --perf-summary LABEL   LABEL.sched.json
"""
import argparse
import json
import os
import re
import statistics
import sys

# Kernel symbols counted as the scheduler: blocking, waking, switching and the wait calls
# that end in them (epoll, nanosleep, futex). Matched as prefixes after "[k] ".
KERNEL_SCHED = (
    "schedule", "__schedule", "preempt_schedule", "try_to_wake_up", "ttwu_", "wake_up_", "__wake_up",
    "wake_q_", "finish_task_switch", "prepare_task_switch", "__switch_to", "switch_mm", "switch_fpu",
    "pick_next_", "put_prev_", "set_next_entity", "enqueue_task", "dequeue_task", "enqueue_entity",
    "dequeue_entity", "update_curr", "update_load_avg", "select_task_rq", "check_preempt",
    "resched_curr", "psi_task_", "psi_group_change", "ep_poll", "do_epoll_wait",
    "__x64_sys_epoll", "do_nanosleep", "hrtimer_nanosleep", "__x64_sys_clock_nanosleep",
    "futex_wait", "futex_wake", "__futex_", "do_futex", "__x64_sys_futex",
)
# User-space schedulers: the Go runtime's (goroutine parking, run queues, netpoller, timers,
# its futex sleeps) and boost::asio's (the transceiver's event loop).
USER_SCHED = re.compile(
    r"^(runtime\.(schedule|findrunnable|park_m|gopark|goready|ready|mcall|gogo|execute|netpoll|stopm|startm|"
    r"notesleep|notewakeup|futexsleep|futexwakeup|futex|runqget|runqput|runqgrab|runqsteal|checkTimers|"
    r"runtimer|wakep|resetspinning|handoffp|injectglist|casgstatus|goschedImpl|newproc|osyield|usleep|"
    r"runOneTimer|nanotime|lock2|unlock2)|boost::asio::detail::(scheduler|epoll_reactor|timer_queue)"
    r"|boost::asio::detail::.*(do_run_one|do_one|run_one))")

WORKER_THREADS = {"floor": r"^rtce-floor-", "passthrough": r"^rtce-media-", "transcoding": r"^rtce-media-",
                  "baseline": r"^rtce-media-"}
CLIENT_NAMES = {"loadgen": "rtce_session_loadgen (C++)", "pion": "rtce_pion_client (Pion)"}
TARGET_NAMES = {"floor": "floor echo", "pion": "Pion echo", "passthrough": "transceiver passthrough",
                "baseline": "transceiver passthrough, --baseline binary",
                "transcoding": "transceiver transcoding"}


def summarize_perf_script(lines):
    """Shares of the samples in `perf script -F ip,sym,dso` output (one block of frames per
    sample, leaf first): kernel scheduler = any kernel frame is a KERNEL_SCHED symbol (its
    callees included: under a paravirtualised kernel the samples of an IRQs-off section land
    on the IRQ-enable call that ends it, finish_task_switch -> pvm_irq_enable, so the leaf
    alone would hide the scheduler); user-space scheduler = the leaf is a USER_SCHED
    function (leaf only: the transceiver has no frame pointers, so its user chains are not
    trusted); kernel = the leaf is in the kernel."""
    samples = kernel_sched = user_sched = in_kernel = 0
    frames = []

    def close():
        nonlocal samples, kernel_sched, user_sched, in_kernel
        if not frames:
            return
        samples += 1
        kernel_syms = [sym for sym, k in frames if k]
        if frames[0][1]:
            in_kernel += 1
        if any(sym.startswith(KERNEL_SCHED) for sym in kernel_syms):
            kernel_sched += 1
        elif not frames[0][1] and USER_SCHED.match(frames[0][0]):
            user_sched += 1
        frames.clear()

    for line in lines:
        line = line.strip()
        if not line:
            close()
            continue
        m = re.match(r"([0-9a-f]+)\s+(.*?)\s+\(([^)]*)\)$", line)
        if not m:
            continue
        ip, sym, dso = m.groups()
        frames.append((sym, dso == "[kernel.kallsyms]" or (len(ip) == 16 and ip.startswith("ffff"))))
    close()
    if samples == 0:
        return {"samples": 0}
    return {"samples": samples, "kernel_sched": 100 * kernel_sched / samples,
            "user_sched": 100 * user_sched / samples, "in_kernel": 100 * in_kernel / samples}


def sched_shares(out, label):
    """(kernel scheduler %, user-space scheduler %, in kernel %) or Nones without a profile."""
    try:
        j = json.load(open(os.path.join(out, label + ".sched.json")))
    except (OSError, ValueError):
        return None, None, None
    if not j.get("samples"):
        return None, None, None
    return j["kernel_sched"], j["user_sched"], j["in_kernel"]


def point_figures(out, label, target):
    try:
        j = json.load(open(os.path.join(out, label + ".json")))
    except (OSError, ValueError):
        return None
    srv = j.get("server") or {}
    n = j.get("sessions_connected") or 0
    win = srv.get("window_s") or j.get("window_s") or 0
    late = j.get("loadgen_sends_late_5ms")
    sent = n * win * 50
    f = {"requested": j.get("sessions_requested"), "connected": n,
         # Packets the client sent more than 5 ms after their slot, as a share of the window's:
         # when it is high the client (or the machine under it) fell behind, not the server.
         "client_late": 100 * late / sent if late is not None and sent > 0 else None,
         "frames": 100 * (j.get("frames_received_ratio") or 0),
         "p50": (j.get("frame_interval_ms") or {}).get("p50"),
         "p99": (j.get("frame_interval_ms") or {}).get("p99"),
         "client_cores": (j.get("cpu_window") or {}).get("loadgen_cores")}
    if win > 0 and "cpu_s" in srv:
        f["server_cores"] = srv["cpu_s"] / win
        f["cpu_ms"] = 1000 * srv["cpu_s"] / (n * win) if n else None
    idle, end = srv.get("rss_kib_idle"), srv.get("rss_kib_window_end")
    if n and idle and end and idle > 0 and end > 0:
        f["rss_kib"] = (end - idle) / n
    threads = srv.get("threads") or []
    if win > 0 and threads:
        rates = [(t["voluntary"] + t["nonvoluntary"]) / win for t in threads]
        f["wakeups_process"] = sum(rates)
        f["threads"] = len(threads)
        pattern = WORKER_THREADS.get(target)
        workers = [r for t, r in zip(threads, rates) if pattern and re.match(pattern, t["name"])]
        if workers:
            f["wakeups_worker"] = statistics.mean(workers)
            f["workers"] = len(workers)
        else:  # Pion: every Go runtime thread that ran in the window
            active = [r for r in rates if r > 0]
            f["wakeups_worker"] = statistics.mean(active) if active else 0
            f["workers"] = len(active)
            f["workers_are_all"] = True
    f["sched_kernel"], f["sched_user"], f["in_kernel"] = sched_shares(out, label)
    return f


def median_of(points):
    keys = set().union(*(p.keys() for p in points))
    m = {}
    for k in keys:
        vals = [p[k] for p in points if p.get(k) is not None]
        if not vals:
            m[k] = None
        elif isinstance(vals[0], (int, float)) and not isinstance(vals[0], bool):
            m[k] = statistics.median(vals)
        else:
            m[k] = vals[0]
    m["rounds"] = len(points)
    for k in ("cpu_ms", "frames"):  # the spread of the two figures the reading leans on
        vals = [p[k] for p in points if p.get(k) is not None]
        if len(vals) > 1:
            m[k + "_range"] = (min(vals), max(vals))
    return m


def fmt(v, d=1, suffix=""):
    return "–" if v is None else f"{v:.{d}f}{suffix}"


def spread(f, key, d):
    r = f.get(key + "_range")
    return f" ({r[0]:.{d}f}–{r[1]:.{d}f})" if r else ""


def row_cells(f):
    worker = fmt(f.get("wakeups_worker"), 0)
    if f.get("wakeups_worker") is not None:
        worker += f" (mean of {f.get('workers'):.0f} Go threads)" if f.get("workers_are_all") else ""
    return [
        f"{fmt(f.get('connected'), 0)}/{fmt(f.get('requested'), 0)}",
        fmt(f.get("frames"), 1, " %") + spread(f, "frames", 1),
        f"{fmt(f.get('p50'), 1)} / {fmt(f.get('p99'), 1)}",
        fmt(f.get("server_cores"), 3),
        fmt(f.get("cpu_ms"), 3) + spread(f, "cpu_ms", 3),
        fmt(f.get("sched_kernel"), 1, " %"),
        fmt(f.get("sched_user"), 1, " %"),
        fmt(f.get("in_kernel"), 0, " %"),
        worker,
        f"{fmt(f.get('wakeups_process'), 0)} ({fmt(f.get('threads'), 0)})",
        fmt(f.get("rss_kib"), 1),
        fmt(f.get("client_cores"), 2),
        fmt(f.get("client_late"), 1, " %"),
    ]


HEADER = ("| client | target | N | rounds | connected | frames delivered | echo interval p50 / p99 (ms) | server CPU (cores) "
          "| CPU ms per session-second | kernel scheduler share | user-space scheduler share | in kernel "
          "| wake-ups/s per worker thread | wake-ups/s whole process (threads) | RSS KiB per session "
          "| client CPU (cores) | client sends > 5 ms late |")


def ratio(rounds_a, rounds_b, key):
    """The median over rounds of the per-round ratio (the two points of a round ran minutes
    apart, so the machine's load drifts less between them than across rounds), with the
    (min–max) when there are several rounds."""
    vals = []
    for r, fa in rounds_a.items():
        fb = rounds_b.get(r)
        if fb and fa.get(key) is not None and fb.get(key):
            vals.append(fa[key] / fb[key])
    if not vals:
        return "–"
    text = f"{statistics.median(vals):.2f}"
    return text + (f" ({min(vals):.2f}–{max(vals):.2f})" if len(vals) > 1 else "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--line")
    ap.add_argument("--perf-summary", metavar="LABEL", help="read `perf script -F ip,sym,dso` on stdin, "
                    "write DIR/LABEL.sched.json")
    args = ap.parse_args()
    if args.perf_summary:
        with open(os.path.join(args.out, args.perf_summary + ".sched.json"), "w") as f:
            json.dump(summarize_perf_script(sys.stdin), f)
        return 0
    points = [l.rstrip("\n").split("\t") for l in open(os.path.join(args.out, "points.tsv")) if l.strip()]
    if args.line:
        for client, target, n, _, label in points:
            if label == args.line:
                f = point_figures(args.out, label, target)
                if f is None:
                    print(f"[peers-bench] {label}: no result", file=sys.stderr)
                    return 0
                c = row_cells(f)
                print(f"[peers-bench] {label}: connected {c[0]}, frames {c[1]}, server {c[3]} cores = {c[4]} ms/session-s, "
                      f"sched {c[5]} kernel / {c[6]} user ({c[7]} in kernel), wake-ups/s worker {c[8]}, "
                      f"process {c[9]}, RSS {c[10]} KiB/session, client {c[11]} cores, {c[12]} of its sends late")
        return 0

    machine = {}
    for line in open(os.path.join(args.out, "machine.txt")):
        k, _, v = line.rstrip("\n").partition("=")
        machine[k] = v
    groups = {}
    for client, target, n, rnd, label in points:
        f = point_figures(args.out, label, target)
        if f is not None:
            groups.setdefault((client, target, int(n)), {})[rnd] = f
    table = {k: median_of(list(v.values())) for k, v in groups.items()}

    if machine.get("virtual") == "yes":
        kind = f"a {machine.get('hypervisor')} guest" if machine.get("hypervisor") else \
            "a virtual machine (CPU flag hypervisor; lscpu names no vendor)"
    else:
        kind = "no hypervisor flag"
    print(f"Machine: {machine.get('model')}, {kind}, "
          f"{machine.get('cpus')} CPUs, kernel {machine.get('kernel')}; load average "
          f"{machine.get('loadavg_start')} at the start, {machine.get('loadavg_end', '?')} at the end. "
          f"Go {machine.get('go') or '?'}, Pion {machine.get('pion') or '?'}; commit {machine.get('commit')}. "
          f"Servers on CPU 0, clients on CPU 1, nice {machine.get('nice', '0')}; {machine.get('seconds')} s windows"
          f"{'' if machine.get('perf') == '1' else '; no perf: scheduler shares not measured'}.")
    print(f"Command: `{machine.get('command').strip()}`\n")
    rounds = max((v["rounds"] for v in table.values()), default=0)
    if rounds > 1:
        print(f"Each figure is the median of {rounds} interleaved rounds; frames delivered and CPU per "
              "session-second give the (min–max) of the rounds.\n")
    print(HEADER)
    print("|" + "---|" * (HEADER.count("|") - 1))
    order = {"loadgen": 0, "pion": 1}
    torder = {"floor": 0, "pion": 1, "baseline": 2, "passthrough": 3, "transcoding": 4}
    for (client, target, n) in sorted(table, key=lambda k: (order.get(k[0], 9), k[2], torder.get(k[1], 9))):
        f = table[(client, target, n)]
        print(f"| {CLIENT_NAMES.get(client, client)} | {TARGET_NAMES.get(target, target)} | {n} | {f['rounds']} | "
              + " | ".join(row_cells(f)) + " |")

    print("\nRatios, same client and same N: the median of the per-round ratios (min–max over rounds):\n")
    print("| ratio | client | N | CPU per session-second | RSS per session | wake-ups/s per worker thread "
          "| kernel scheduler share |")
    print("|---|---|---|---|---|---|---|")
    pairs = [("passthrough", "pion", "transceiver passthrough / Pion"),
             ("passthrough", "floor", "transceiver passthrough / floor"),
             ("transcoding", "floor", "transceiver transcoding / floor"),
             ("pion", "floor", "Pion / floor"),
             ("transcoding", "passthrough", "transcoding / passthrough"),
             ("passthrough", "baseline", "transceiver passthrough / --baseline binary")]
    for client in sorted({k[0] for k in table}, key=lambda c: order.get(c, 9)):
        for n in sorted({k[2] for k in table if k[0] == client}):
            for a, b, name in pairs:
                ga, gb = groups.get((client, a, n)), groups.get((client, b, n))
                if ga and gb:
                    print(f"| {name} | {CLIENT_NAMES.get(client, client)} | {n} | {ratio(ga, gb, 'cpu_ms')} | "
                          f"{ratio(ga, gb, 'rss_kib')} | {ratio(ga, gb, 'wakeups_worker')} | "
                          f"{ratio(ga, gb, 'sched_kernel')} |")
    opus_path = os.path.join(args.out, "opus-cost.json")
    if os.path.exists(opus_path):
        opus = json.load(open(opus_path))
        print(f"\nStand-alone Opus (rtce_opus_cost, the generator's packet, {opus['rate']} Hz, complexity "
              f"{opus['complexity']}, {opus['bitrate']} bit/s): decode {opus['decode_us']:.1f} us + encode "
              f"{opus['encode_us']:.1f} us per frame = {opus['ms_per_session_second']:.3f} ms per session-second. "
              "Transcoding against passthrough plus that, same round (target <= 1.15):\n")
        print("| client | N | transcoding ms/session-s | passthrough + Opus ms/session-s | ratio |")
        print("|---|---|---|---|---|")
        for client in sorted({k[0] for k in table}, key=lambda c: order.get(c, 9)):
            for n in sorted({k[2] for k in table if k[0] == client}):
                gt, gp = groups.get((client, "transcoding", n)), groups.get((client, "passthrough", n))
                if not gt or not gp:
                    continue
                vals = [(ft["cpu_ms"], gp[r]["cpu_ms"] + opus["ms_per_session_second"]) for r, ft in gt.items()
                        if r in gp and ft.get("cpu_ms") is not None and gp[r].get("cpu_ms") is not None]
                if vals:
                    rs = [t / p for t, p in vals]
                    print(f"| {CLIENT_NAMES.get(client, client)} | {n} | {statistics.median(t for t, _ in vals):.3f} | "
                          f"{statistics.median(p for _, p in vals):.3f} | {statistics.median(rs):.2f}"
                          + (f" ({min(rs):.2f}–{max(rs):.2f})" if len(rs) > 1 else "") + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
