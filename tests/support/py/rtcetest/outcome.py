"""How a harness ends, decided here once: 0 pass, 1 fail, 77 skip (CTest's SKIP_RETURN_CODE).

Only a missing kernel feature or privilege may skip a test: Unavailable, raised by the
probes below (not root, no network namespaces, no bpf filesystem, no native XDP on a veth,
no sch_netem). Everything else a harness needs — a tool, a Debian or npm package, a build
product — is installed by scripts/install-deps.sh and built by the build, so its absence is
a SetupError and the test fails, saying what is missing. A setup step that breaks later
(a veth that will not configure, a process that will not start) fails the same way.

    def main():
        ...
        return outcome.exit_code(lambda: run(args))   # run() may raise either

or, for a harness that reports JSON: netns.netns_main()."""

import os
import shutil
import subprocess

SKIP = 77
SBIN_PATH = "/usr/sbin:/sbin:/usr/bin:/bin"
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's, where python3-aiortc lives
REPO_ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", ".."))
PLAYWRIGHT_CORE = os.path.join(REPO_ROOT, "tests", "golden", "tools", "node_modules", "playwright-core")
PUPPETEER_CORE = os.path.join(REPO_ROOT, "tests", "golden", "tools", "node_modules", "puppeteer-core")


class Unavailable(Exception):
    """This host lacks a kernel feature or a privilege the test needs: the test is skipped."""


class SetupError(Exception):
    """Something the test needs is missing or broken (a tool, a package, a build product):
    the test fails."""


def skip(reason):
    print("SKIP: %s" % reason, flush=True)
    return SKIP


def setup_failed(reason):
    print("FAIL: setup: %s" % reason, flush=True)
    return 1


def exit_code(body):
    """Runs body() (which returns an exit code) and turns Unavailable into a skip and
    SetupError into a failure, each printed with its reason."""
    try:
        return body()
    except Unavailable as e:
        return skip(e)
    except SetupError as e:
        return setup_failed(e)


def unmet(prerequisites):
    """None when prerequisites() raises nothing; else the exit code it earns (skip or fail),
    with the reason printed."""
    return exit_code(lambda: prerequisites() and None)


def _run(cmd, timeout=10):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)


# ---------------------------------------------------------------- kernel features, privileges

def require_root(why):
    if os.geteuid() != 0:
        raise Unavailable("not root (euid %d): %s" % (os.geteuid(), why))


def require_netns():
    """Root, iproute2, and a kernel that creates network namespaces."""
    require_root("network namespaces need CAP_SYS_ADMIN")
    require_tool("ip", "iproute2")
    import netns_topology as nt
    probe = "%s%d-probe" % (nt.NS_PREFIX, os.getpid())
    r = _run(["ip", "netns", "add", probe])
    if r.returncode != 0:
        raise Unavailable("'ip netns add' does not work here: %s" % r.stderr.strip())
    _run(["ip", "netns", "del", probe])


def require_bpffs():
    import netns_topology as nt
    reason = nt.ensure_bpffs()
    if reason:
        raise Unavailable(reason)


def require_native_xdp(xdp_pass_obj):
    """xdp_pass.bpf.o built (else SetupError) and attachable in native mode to a veth in a
    probe namespace (else Unavailable: the kernel has no native XDP on veth). Call after
    require_netns()."""
    require_file(xdp_pass_obj, "bpf/CMakeLists.txt builds it")
    require_bpffs()
    require_tool("ethtool", "ethtool (prepare_for_xdp turns veth offloads off)")
    import netns_topology as nt
    probe = "%s%d-xdp-probe" % (nt.NS_PREFIX, os.getpid())
    _run(["ip", "netns", "add", probe])
    try:
        r = _run(["ip", "-n", probe, "link", "add", "xp0", "type", "veth", "peer", "name", "xp1"])
        if r.returncode != 0:
            raise Unavailable("no veth in this kernel: %s" % r.stderr.strip())
        r = _run(["ip", "-n", probe, "link", "set", "dev", "xp0", "xdpdrv", "obj", xdp_pass_obj, "sec", "xdp"])
        if r.returncode != 0:
            raise Unavailable("native XDP on a veth refused: %s" % r.stderr.strip())
    finally:
        _run(["ip", "netns", "del", probe])


def require_netem(ns, dev):
    """tc netem works on dev in ns (the kernel has sch_netem)."""
    require_tool("tc", "iproute2")
    r = _run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "netem", "delay", "1ms"])
    if r.returncode != 0:
        raise Unavailable("tc netem does not work here: %s" % r.stderr.strip())
    _run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", dev, "root"])


def netem_works(ns, dev):
    """(True, None) when tc netem works on dev in ns, else (False, why)."""
    try:
        require_netem(ns, dev)
        return True, None
    except Unavailable as e:
        return False, str(e)


# ---------------------------------------------------------------- tools, packages, build products

def require_tool(name, package=None):
    if not shutil.which(name, path=SBIN_PATH + ":" + os.environ.get("PATH", "")):
        raise SetupError("%s not found (install %s: scripts/install-deps.sh)" % (name, package or name))


def require_file(path, hint):
    if not os.path.exists(path):
        raise SetupError("%s not found (%s)" % (path, hint))


def require_executables(**flags):
    """require_executables(transceiver_bin=path, ...): each one built and executable."""
    for flag, path in flags.items():
        if not path or not os.access(path, os.X_OK):
            raise SetupError("--%s %s is not an executable (build it, or pass the path)"
                             % (flag.replace("_", "-"), path))


def require_python_modules(*modules, python=SYSTEM_PYTHON):
    r = subprocess.run([python, "-c", "import " + ", ".join(modules)], capture_output=True, timeout=60)
    if r.returncode != 0:
        raise SetupError("%s cannot import %s (Debian python3-%s; scripts/install-deps.sh): %s"
                         % (python, ", ".join(modules), " python3-".join(modules),
                            r.stderr.decode(errors="replace").strip().splitlines()[-1:]))


def require_aiortc():
    require_python_modules("aiortc", "numpy")


def require_browser(chromium, node="node"):
    """Chromium, node and playwright-core (tests/golden/tools/node_modules or PLAYWRIGHT_CORE)."""
    if not (os.path.isfile(chromium) and os.access(chromium, os.X_OK)):
        raise SetupError("chromium not found at %s (scripts/install-deps.sh)" % chromium)
    require_tool(node, "nodejs")
    if not os.path.isdir(PLAYWRIGHT_CORE) and not os.environ.get("PLAYWRIGHT_CORE"):
        raise SetupError("playwright-core not installed (%s; run npm ci in tests/golden/tools)" % PLAYWRIGHT_CORE)


def require_firefox(firefox, node="node"):
    """Firefox ESR, node and puppeteer-core (tests/golden/tools/node_modules or PUPPETEER_CORE),
    for browser_e2e.mjs --browser firefox."""
    if not (os.path.isfile(firefox) and os.access(firefox, os.X_OK)):
        raise SetupError("firefox not found at %s (firefox-esr, scripts/install-deps.sh)" % firefox)
    require_tool(node, "nodejs")
    if not os.path.isdir(PUPPETEER_CORE) and not os.environ.get("PUPPETEER_CORE"):
        raise SetupError("puppeteer-core not installed (%s; run npm ci in tests/golden/tools)" % PUPPETEER_CORE)


def require_redis():
    require_tool("redis-server", "redis-server")

