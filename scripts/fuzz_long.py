#!/usr/bin/env python3
"""fuzz_long.py — the long fuzzing run of docs/security.md (Sanitizers and fuzzing): every libFuzzer target CTest
knows (label fuzz), one after another, for a bounded time each on a copy of its seed corpus
(with the seed dir and -max_len its CTest smoke run uses), and a Markdown table of what each
did: executions, coverage (cov/ft of libFuzzer's last line), corpus size, findings.

  scripts/fuzz_long.py [--build-dir build] [--seconds 60] [--only NAME,...] [--work DIR]

Crash inputs land in WORK/<target>/artifacts/; the exit status is 1 when any target found one.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys


def fuzz_tests(build_dir):
    out = subprocess.run(["ctest", "--show-only=json-v1", "-L", "fuzz"], cwd=build_dir, check=True,
                         capture_output=True, text=True).stdout
    for test in json.loads(out)["tests"]:
        # sh -c "<copy the seeds, exec the fuzzer>" fuzz <copy dir> <seed dir> <binary> <seconds> <max_len>
        cmd = test["command"]
        _, seeds, binary, _, max_len = cmd[-5:]
        yield test["name"], binary, seeds, max_len


def run_one(name, binary, seeds, max_len, seconds, work):
    corpus = os.path.join(work, name, "corpus")
    artifacts = os.path.join(work, name, "artifacts") + "/"
    shutil.rmtree(os.path.join(work, name), ignore_errors=True)
    os.makedirs(artifacts)
    shutil.copytree(seeds, corpus)
    # -timeout: an input slower than this is a finding (a hang), not a stalled run.
    cmd = ["nice", binary, f"-max_total_time={seconds}", f"-max_len={max_len}", "-print_final_stats=1",
           "-timeout=25", "-rss_limit_mb=2048", f"-artifact_prefix={artifacts}", corpus]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=seconds + 120)
    log = proc.stderr
    with open(os.path.join(work, name, "log.txt"), "w") as f:
        f.write(log)
    execs = re.search(r"stat::number_of_executed_units:\s*(\d+)", log)
    last = [line for line in log.splitlines() if re.match(r"#\d+\s", line) and " cov: " in line]
    cov = re.search(r"cov: (\d+) ft: (\d+)", last[-1]) if last else None
    findings = sorted(os.listdir(artifacts))
    return {
        "target": name,
        "execs": int(execs.group(1)) if execs else 0,
        "cov": int(cov.group(1)) if cov else 0,
        "ft": int(cov.group(2)) if cov else 0,
        "corpus": len(os.listdir(corpus)),
        "seeds": len(os.listdir(seeds)),
        "status": proc.returncode,
        "findings": findings,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build-dir", default="build")
    ap.add_argument("--seconds", type=int, default=60)
    ap.add_argument("--only", default="")
    ap.add_argument("--work", default="/tmp/rtcedge-fuzz-long")
    args = ap.parse_args()
    only = {n if n.startswith("fuzz_") else "fuzz_" + n for n in args.only.split(",") if n}
    rows = []
    for name, binary, seeds, max_len in fuzz_tests(args.build_dir):
        if only and name not in only:
            continue
        row = run_one(name, binary, seeds, max_len, args.seconds, args.work)
        rows.append(row)
        print(f"{name}: {row['execs']} execs, cov {row['cov']} ft {row['ft']}, corpus {row['seeds']} -> "
              f"{row['corpus']}, exit {row['status']}, findings {row['findings'] or 'none'}", flush=True)
    print(f"\n| target | seconds | executions | cov | ft | corpus (seeds → end) | findings |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        found = ", ".join(r["findings"]) if r["findings"] else "none"
        print(f"| `{r['target']}` | {args.seconds} | {r['execs']:,} | {r['cov']} | {r['ft']} | "
              f"{r['seeds']} → {r['corpus']} | {found} |")
    return 1 if any(r["findings"] or r["status"] != 0 for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
