#!/usr/bin/env python3
"""dockerfile_test.py — what can be checked of docker/*.Dockerfile without a container engine
(standard library, dpkg and apt-cache):

- every `COPY --from=<build stage>` source is a file the build produces: the stage's
  `cmake -B <dir>` maps to this CMake build directory, the file exists there, and a binary
  under bin/ is one of the stage's `--target`s;
- every plain `COPY` source exists in the repository;
- the final stage is Debian 12 and installs, directly or through dependencies, the package
  of every shared library the copied binaries load (ldd here; Essential/required packages
  are in every debian:12-slim);
- the build stage installs every -dev package scripts/install-deps.sh does (CMake's
  configure needs them all) and the BPF toolchain;
- no BPF object is committed, and the ignore file keeps local build trees out of the context;
- the transceiver runs as the chart's non-root user; the relay image has the programs the
  chart's relay commands call (ip, for the interface of the node's IP; bpftool)."""

import argparse
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DOCKER = os.path.join(ROOT, "docker")

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL " + what)
    return cond


def instructions(path):
    """[(INSTRUCTION, argument text)], continuation lines joined, comments dropped."""
    out, cur = [], ""
    for line in open(path):
        s = line.rstrip("\n")
        if not cur and (not s.strip() or s.lstrip().startswith("#")):
            continue
        if s.endswith("\\"):
            cur += s[:-1] + " "
            continue
        cur += s
        word, _, rest = cur.strip().partition(" ")
        out.append((word.upper(), rest.strip()))
        cur = ""
    return out


def stages(path):
    result, stage = [], None
    for ins, arg in instructions(path):
        if ins == "FROM":
            parts = arg.split()
            stage = {"image": parts[0], "name": parts[2] if len(parts) > 2 and parts[1].upper() == "AS" else None,
                     "workdir": "/", "build_dir": None, "targets": set(), "apt": set(), "copies": [], "user": None}
            result.append(stage)
        elif ins == "WORKDIR":
            stage["workdir"] = os.path.join(stage["workdir"], arg)
        elif ins == "RUN":
            words = shlex.split(arg)
            for i, w in enumerate(words):
                if w == "-B":
                    stage["build_dir"] = os.path.join(stage["workdir"], words[i + 1])
                if w == "--target":
                    j = i + 1
                    while j < len(words) and not words[j].startswith("-") and words[j] != "&&":
                        stage["targets"].add(words[j])
                        j += 1
            for m in re.finditer(r"apt-get install ([^&;]*)", arg):
                stage["apt"].update(w for w in m.group(1).split() if not w.startswith("-"))
        elif ins == "COPY":
            words = arg.split()
            frm = next((w.split("=", 1)[1] for w in words if w.startswith("--from=")), None)
            paths = [w for w in words if not w.startswith("--")]
            stage["copies"].append((frm, paths[:-1], paths[-1]))
        elif ins == "USER":
            stage["user"] = arg
    return result


def owners(paths):
    """{library path: Debian package} for the paths dpkg knows, in one dpkg -S call (each
    path is also tried as its /usr-merged twin and its resolved target)."""
    candidates = {}
    for p in paths:
        real = os.path.realpath(p)
        for c in (p, real, p.replace("/usr/lib/", "/lib/", 1), real.replace("/usr/lib/", "/lib/", 1)):
            candidates.setdefault(c, p)
    r = subprocess.run(["dpkg", "-S"] + sorted(candidates), capture_output=True, text=True)
    out = {}
    for line in r.stdout.splitlines():
        pkg, _, path = line.partition(": ")
        if path in candidates and not line.startswith("diversion"):
            out.setdefault(candidates[path], pkg.split(",")[0].split(":")[0])
    return out


def closure(packages):
    r = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests", "--no-conflicts",
                        "--no-breaks", "--no-replaces", "--no-enhances"] + sorted(packages),
                       capture_output=True, text=True)
    out = set(packages)
    for line in r.stdout.splitlines():
        m = re.match(r"^\s*(?:Pre)?Depends: <?([^ >]+)>?$", line) or re.match(r"^([a-z0-9][^ ]*)$", line)
        if m:
            out.add(m.group(1).split(":")[0])
    return out


def base_packages(pkgs):
    """Essential or Priority: required packages (in every Debian 12 image, slim included)."""
    r = subprocess.run(["dpkg-query", "-W", "-f", "${Package} ${Essential} ${Priority}\n"] + sorted(pkgs),
                       capture_output=True, text=True)
    return {l.split()[0] for l in r.stdout.splitlines() if " yes " in l or l.endswith(" required")}


def libraries(binary):
    r = subprocess.run(["ldd", binary], capture_output=True, text=True, check=True)
    return [m.group(1) for m in re.finditer(r"=> (/\S+)", r.stdout)]


def install_deps_dev_packages():
    text = open(os.path.join(ROOT, "scripts", "install-deps.sh")).read()
    block = text.split("packages=(", 1)[1].split("\n)", 1)[0]
    words = " ".join(l.split("#", 1)[0] for l in block.splitlines()).split()
    # golang-*-dev are Go sources for the benchmark's Pion peer (bench/pion/), not libraries
    # the images build against; CMake leaves those targets out without go.
    return {w for w in words if w.endswith("-dev") and not w.startswith("golang-")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--relay", required=True)
    ap.add_argument("--transceiver", required=True)
    args = ap.parse_args()
    built = {"rtcedge-relay": args.relay, "rtcedge-transceiver": args.transceiver}
    files = sorted(f for f in os.listdir(DOCKER) if f.endswith(".Dockerfile"))
    check(files == ["relay.Dockerfile", "transceiver.Dockerfile"], "docker/ has the two Dockerfiles: %s" % files)
    dev = install_deps_dev_packages()
    committed = subprocess.run(["git", "-C", ROOT, "ls-files", "*.bpf.o", "*.o"], capture_output=True,
                               text=True).stdout.split()
    check(not committed, "object files are committed: %s" % committed)
    chart_text = "".join(open(os.path.join(ROOT, "helm", "rtcedge", "templates", t)).read()
                         for t in os.listdir(os.path.join(ROOT, "helm", "rtcedge", "templates")))
    for f in files:
        before = len(failures)
        tag = "[%s] " % f
        path = os.path.join(DOCKER, f)
        ignore = open(path + ".dockerignore").read().split() if os.path.exists(path + ".dockerignore") else []
        check("build/" in ignore and "**/*.bpf.o" in ignore,
              tag + "%s.dockerignore keeps build/ and BPF objects out of the context" % f)
        st = stages(path)
        by_name = {s["name"]: s for s in st if s["name"]}
        final = st[-1]
        check(final["image"].startswith("debian:12"), tag + "final stage is Debian 12: %s" % final["image"])
        for s in st[:-1]:
            check(s["image"].startswith("debian:12"), tag + "build stage is Debian 12: %s" % s["image"])
            missing = dev - s["apt"]
            check(not missing, tag + "build stage lacks install-deps.sh's -dev packages %s" % sorted(missing))
            check({"clang", "bpftool", "cmake"} <= s["apt"], tag + "build stage has clang, bpftool and cmake")
        copied_binaries = []
        for frm, srcs, dst in final["copies"]:
            for src in srcs:
                if frm is None:
                    check(os.path.exists(os.path.join(ROOT, src)), tag + "COPY %s: not in the repository" % src)
                    continue
                stage = by_name.get(frm)
                if not check(stage and stage["build_dir"], tag + "COPY --from=%s: no such stage with a CMake build"
                             % frm):
                    continue
                rel = os.path.relpath(src, stage["build_dir"])
                if not check(not rel.startswith(".."), tag + "COPY %s is not inside the stage's build dir %s" % (
                        src, stage["build_dir"])):
                    continue
                local = os.path.join(args.build_dir, rel)
                check(os.path.isfile(local), tag + "COPY %s: the build produces no %s" % (src, local))
                if rel.startswith("bin/"):
                    name = os.path.basename(rel)
                    check(name in stage["targets"], tag + "COPY %s: %s is not a --target the stage builds (%s)" % (
                        src, name, sorted(stage["targets"])))
                    check(os.access(local, os.X_OK), tag + "%s is not executable" % local)
                    copied_binaries.append(built.get(name, local))
                    # The chart runs the binary by this path.
                    installed = dst if not dst.endswith("/") else dst + name
                    check(installed in chart_text, tag + "the chart never runs %s (it copies to %s)" % (name, installed))
        check(copied_binaries, tag + "copies a binary out of the build")
        # The runtime stage carries every shared library those binaries load.
        allowed = closure(final["apt"])
        for binary in copied_binaries:
            pkgs = {}
            libs = libraries(binary)
            owner = owners(libs)
            for lib in libs:
                pkgs.setdefault(owner.get(lib), []).append(lib)
            check(None not in pkgs, tag + "libraries of no package: %s" % pkgs.get(None))
            base = base_packages({p for p in pkgs if p})
            for pkg, libs in sorted((p, l) for p, l in pkgs.items() if p):
                check(pkg in allowed or pkg in base,
                      tag + "%s loads %s from %s, which the runtime stage does not install" % (
                          os.path.basename(binary), libs[0], pkg))
        if f.startswith("transceiver"):
            check(final["user"] and final["user"].split(":")[0].isdigit() and final["user"].split(":")[0] != "0",
                  tag + "the transceiver runs as a numeric non-root USER: %s" % final["user"])
            chart = open(os.path.join(ROOT, "helm", "rtcedge", "templates", "transceiver-statefulset.yaml")).read()
            uid = re.search(r"runAsUser: (\d+)", chart).group(1)
            check(final["user"] and final["user"].split(":")[0] == uid,
                  tag + "USER %s is the chart's runAsUser %s" % (final["user"], uid))
        else:
            check({"iproute2", "bpftool"} <= final["apt"], tag + "the relay image has iproute2 and bpftool")
        print("%s %s: %d stages, copies %s" % ("ok  " if len(failures) == before else "FAIL", f, len(st),
                                               [os.path.basename(b) for b in copied_binaries]))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
