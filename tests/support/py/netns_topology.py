"""Network-namespace topology for the relay integration test (standard library only).

    client ns                  relay ns                                 xcvr ns
    cl0 198.18.0.2/24  <--->   rc0 198.18.0.1/24 + VIP 198.18.255.100/32
        fd00:198:18:1::2/64        fd00:198:18:1::1/64 + VIP fd00:198:18:ff::100/128
                               rx0 198.18.1.1/24            <--->   xc0 198.18.1.2/24
                                   fd00:198:18:2::1/64                  fd00:198:18:2::2/64

The relay namespace is an endpoint of both links (no forwarding): the relay process holds
the VIP on its client-facing veth and reaches the transceiver over the other link. The
VIPs are host routes outside the link prefixes (the client routes them via the relay's
link address), so the kernel's default source address toward the client is the link
address, not the VIP: a reply that comes from the VIP came from it on purpose.
Addresses come only from 198.18.0.0/15 and the ULA fd00:198:18::/48.

Everything this module creates (namespaces, processes) is recorded in one registry and
removed by cleanup_all(): from the Topology context manager, atexit, and SIGTERM/SIGHUP
handlers (install_signal_cleanup). Processes are started with PR_SET_PDEATHSIG so that
they die with the test even when it is SIGKILLed (e.g. by a CTest timeout); namespaces
left behind by such a run are swept at the next start (sweep_stale)."""

import atexit
import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

CLONE_NEWNET = 0x40000000
NS_PREFIX = "rtce-it-"
NETNS_DIR = "/run/netns"
BPFFS = "/sys/fs/bpf"

_libc = ctypes.CDLL(None, use_errno=True)

CLIENT_V4, CLIENT_V6 = "198.18.0.2", "fd00:198:18:1::2"
RELAY_LINK_V4, RELAY_LINK_V6 = "198.18.0.1", "fd00:198:18:1::1"
VIP_V4, VIP_V6 = "198.18.255.100", "fd00:198:18:ff::100"
RELAY_XCVR_V4, RELAY_XCVR_V6 = "198.18.1.1", "fd00:198:18:2::1"
XCVR_V4, XCVR_V6 = "198.18.1.2", "fd00:198:18:2::2"


# ---------------------------------------------------------------------------- registry

_lock = threading.RLock()
_namespaces = []  # names we created, in creation order
_processes = []  # subprocess.Popen objects we started
_scratch_dirs = []  # temporary directories we made
_cleanups = []  # callables run before processes are stopped (e.g. removing bpffs pins)
_cleaned = False


def _log(msg):
    sys.stderr.write("[netns] %s\n" % msg)
    sys.stderr.flush()


def run(cmd, check=True, timeout=10):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
    return r


def stop_process(proc, sig=signal.SIGTERM, timeout=3.0):
    """Signals one process we started (by its pid, via Popen) and reaps it; SIGKILL after
    `timeout`. Returns its exit code."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            proc.wait(timeout=5)
    return proc.returncode


def http_get_in(ns, host, port, path, timeout=2.0, headers=None):
    """(status, body) of GET http://host:port/path (with `headers`) from a socket created inside ns."""
    import prom_metrics  # noqa: E402 (a sibling module; imported late to keep this one standalone)
    sock = socket_in(ns, socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect((host, port))
        return prom_metrics.fetch(sock, host, path, timeout, headers)
    finally:
        sock.close()


class HttpSplice:
    """Listens on 127.0.0.1 in listen_ns; each connection is joined to a new connection to
    upstream made from upstream_ns. Plays the geo-aware front door: every request on the
    client->server side gets `header: value` (a client-sent one is removed). Requests are
    framed by Content-Length (what the page and aiortc send); a chunked request body is passed
    through unparsed after its headers. Without a header it is a plain TCP forward (listen_port:
    a fixed port instead of a free one); a refused upstream closes the accepted connection at
    once and an upstream that closes closes the other side, as a direct connection would."""

    def __init__(self, listen_ns, upstream_ns, upstream, header=None, value=None, listen_port=0):
        self.upstream_ns, self.upstream = upstream_ns, upstream
        self.header, self.value = header, value
        self.listener = socket_in(listen_ns, socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", listen_port))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self.requests_tagged = 0
        self._open = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept_loop, name="splice-accept", daemon=True).start()

    def _accept_loop(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="splice-conn", daemon=True).start()

    def _serve(self, down):
        up = socket_in(self.upstream_ns, socket.AF_INET, socket.SOCK_STREAM)
        with self._lock:
            if self._closed:
                down.close()
                up.close()
                return
            self._open.update((down, up))
            self.connections += 1
        try:
            up.settimeout(5.0)
            up.connect(self.upstream)
            up.settimeout(None)
            pump = threading.Thread(target=self._pump, args=(up, down), daemon=True)
            pump.start()
            if self.header:
                self._pump_requests(down, up)
            else:
                self._pump(down, up)
            pump.join()
        except OSError as e:
            _log("splice connection to %s:%d failed: %s" % (self.upstream + (e,)))
        finally:
            with self._lock:
                self._open.discard(down)
                self._open.discard(up)
            down.close()
            up.close()

    @staticmethod
    def _pump(src, dst, buf=b""):
        try:
            if buf:
                dst.sendall(buf)
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def _pump_requests(self, src, dst):
        buf = b""
        name = self.header.lower().encode()
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    if len(buf) > 65536:
                        raise OSError("request head over 64 KiB")
                    data = src.recv(65536)
                    if not data:
                        raise EOFError
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.split(b"\r\n")
                kept = [ln for ln in lines[1:] if ln.split(b":", 1)[0].strip().lower() != name]
                length, chunked = 0, False
                for ln in kept:
                    k, _, v = ln.partition(b":")
                    if k.strip().lower() == b"content-length":
                        length = int(v.strip())
                    elif k.strip().lower() == b"transfer-encoding" and b"chunked" in v.lower():
                        chunked = True
                out = b"\r\n".join([lines[0], b"%s: %s" % (self.header.encode(), self.value.encode())] + kept)
                dst.sendall(out + b"\r\n\r\n")
                with self._lock:
                    self.requests_tagged += 1
                if chunked:
                    self._pump(src, dst, buf)
                    return
                while len(buf) < length:
                    data = src.recv(65536)
                    if not data:
                        raise EOFError
                    buf += data
                dst.sendall(buf[:length])
                buf = buf[length:]
        except (OSError, EOFError, ValueError):
            pass
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def close(self):
        with self._lock:
            self._closed = True
            socks = list(self._open)
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def make_scratch_dir():
    """A temporary directory named after this process (so a later run can sweep it if this
    one is SIGKILLed), removed by cleanup_all()."""
    path = tempfile.mkdtemp(prefix="%s%d-" % (NS_PREFIX, os.getpid()))
    with _lock:
        _scratch_dirs.append(path)
    return path


def register_cleanup(fn):
    """Runs fn() in cleanup_all() (once, even on failure or signal), before processes are
    stopped and namespaces deleted. Returns fn so that callers may unregister it."""
    with _lock:
        _cleanups.append(fn)
    return fn


def _unregister(registry, item):
    with _lock:
        if item in registry:
            registry.remove(item)


def unregister_cleanup(fn):
    _unregister(_cleanups, fn)


def cleanup_all():
    """Runs registered cleanups, kills every process we started, deletes every namespace and
    scratch directory we created. Idempotent."""
    global _cleaned
    with _lock:
        procs, names, dirs = list(_processes), list(_namespaces), list(_scratch_dirs)
        fns = list(_cleanups)
        _processes.clear()
        _namespaces.clear()
        _scratch_dirs.clear()
        _cleanups.clear()
    for fn in reversed(fns):
        try:
            fn()
        except Exception as e:  # keep cleaning: namespaces must go whatever happened
            _log("cleanup %r failed: %s" % (fn, e))
    for p in procs:
        with contextlib.suppress(Exception):
            stop_process(p, timeout=2.0)
    for name in reversed(names):
        # Anything still running inside is ours (only we create this prefix).
        with contextlib.suppress(Exception):
            for pid in run(["ip", "netns", "pids", name], check=False).stdout.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
        r = run(["ip", "netns", "del", name], check=False)
        if r.returncode != 0 and os.path.exists(os.path.join(NETNS_DIR, name)):
            _log("could not delete namespace %s: %s" % (name, r.stderr.strip()))
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)
    _cleaned = True


def _on_signal(signum, _frame):
    _log("signal %d: cleaning up namespaces and processes" % signum)
    cleanup_all()
    os._exit(128 + signum)


def install_signal_cleanup():
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    atexit.register(cleanup_all)


def sweep_stale():
    """Deletes namespaces and scratch directories with our prefix whose creating test
    process is gone (a run killed with SIGKILL cannot clean up after itself)."""
    tmp = tempfile.gettempdir()
    for entry in os.listdir(tmp):
        m = re.match(re.escape(NS_PREFIX) + r"(\d+)-", entry)
        path = os.path.join(tmp, entry)
        if (m and not os.path.exists("/proc/%s" % m.group(1)) and os.path.isdir(path)
                and not os.path.islink(path) and os.stat(path).st_uid == os.geteuid()):
            _log("removing stale scratch directory %s" % path)
            shutil.rmtree(path, ignore_errors=True)
    if os.path.isdir(BPFFS):
        for entry in os.listdir(BPFFS):
            m = re.match(re.escape(NS_PREFIX) + r"(\d+)(?:-|$)", entry)
            if m and not os.path.exists("/proc/%s" % m.group(1)):
                _log("removing stale bpffs pins %s" % os.path.join(BPFFS, entry))
                remove_pins(os.path.join(BPFFS, entry))
    for name in list_namespaces():
        m = re.match(re.escape(NS_PREFIX) + r"(\d+)-", name)
        if not m or os.path.exists("/proc/%s" % m.group(1)):
            continue
        _log("removing stale namespace %s" % name)
        for pid in run(["ip", "netns", "pids", name], check=False).stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
        run(["ip", "netns", "del", name], check=False)


def list_namespaces():
    r = run(["ip", "-j", "netns", "list"], check=False)
    try:
        return [e["name"] for e in json.loads(r.stdout or "[]")]
    except ValueError:
        return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def netns_unavailable_reason():
    """None when this process can create network namespaces, else why not."""
    if os.geteuid() != 0:
        return "not root (euid %d): network namespaces need CAP_SYS_ADMIN" % os.geteuid()
    for tool in ("/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"):
        if os.access(tool, os.X_OK):
            break
    else:
        return "iproute2 'ip' not found"
    probe = "%s%d-probe" % (NS_PREFIX, os.getpid())
    r = run(["ip", "netns", "add", probe], check=False)
    if r.returncode != 0:
        return "'ip netns add' does not work here: %s" % r.stderr.strip()
    run(["ip", "netns", "del", probe], check=False)
    return None


# ---------------------------------------------------------------------------- bpffs

def ensure_bpffs():
    """None when BPFFS is a mounted bpf filesystem (mounting one if nothing is mounted
    there), else why not. A mount made here stays: it is the standard location."""
    def is_bpffs():
        with open("/proc/self/mounts") as f:
            return any(line.split()[1:3] == [BPFFS, "bpf"] for line in f)

    if is_bpffs():
        return None
    if not os.path.isdir(BPFFS):
        return "%s does not exist (kernel without BPF syscall support?)" % BPFFS
    r = run(["mount", "-t", "bpf", "bpf", BPFFS], check=False)
    if r.returncode != 0 or not is_bpffs():
        return "cannot mount a bpf filesystem on %s: %s" % (BPFFS, r.stderr.strip())
    _log("mounted a bpf filesystem on %s" % BPFFS)
    return None


def remove_pins(path):
    """rm -rf for a bpffs pin directory (unpinning a link detaches its program)."""
    if not path.startswith(BPFFS + "/" + NS_PREFIX):
        raise ValueError("refusing to remove %s: not one of our pin directories" % path)
    shutil.rmtree(path, ignore_errors=True)
    return not os.path.exists(path)


def detach_pins(relay_bin, path, log=None):
    """`rtcedge-relay detach --pin-path path` (unpinning the links detaches the program), then
    rm -rf whatever is left (remove_pins); a failed detach is logged. None when path does not
    exist, else the detach's exit code."""
    if not os.path.exists(path):
        return None
    r = subprocess.run([relay_bin, "detach", "--pin-path", path], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=10)
    if r.returncode != 0:
        (log or _log)("detach --pin-path %s: %s" % (path, r.stdout.strip()))
    remove_pins(path)
    return r.returncode


# ---------------------------------------------------------------------------- setns

@contextlib.contextmanager
def entered(ns_name):
    """Runs the body with this thread in network namespace ns_name. Sockets created inside
    stay in that namespace after the thread returns to its own."""
    orig = os.open("/proc/thread-self/ns/net", os.O_RDONLY | os.O_CLOEXEC)
    try:
        target = os.open(os.path.join(NETNS_DIR, ns_name), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        os.close(orig)
        raise
    try:
        if _libc.setns(target, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "setns(%s): %s" % (ns_name, os.strerror(e)))
        try:
            yield
        finally:
            if _libc.setns(orig, CLONE_NEWNET) != 0:
                # Carrying on in the wrong namespace would corrupt every later step.
                _log("FATAL: cannot return to the original network namespace")
                cleanup_all()
                os._exit(70)
    finally:
        os.close(target)
        os.close(orig)


def socket_in(ns_name, family, kind=socket.SOCK_DGRAM):
    with entered(ns_name):
        return socket.socket(family, kind)


# ---------------------------------------------------------------------------- processes

_LAUNCHER = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]): os._exit(99)\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


# Joins the namespace with setns(2) only: unlike `ip netns exec`, which remounts /sys for
# the namespace (hiding the bpf filesystem at /sys/fs/bpf), the mounts stay the test's.
_LAUNCHER_SETNS = (
    "import ctypes, os, signal, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG\n"
    "if os.getppid() != int(sys.argv[1]): os._exit(99)\n"
    "fd = os.open(sys.argv[2], os.O_RDONLY | os.O_CLOEXEC)\n"
    "if libc.setns(fd, 0x40000000) != 0: sys.exit('setns %s: %s' % (sys.argv[2], os.strerror(ctypes.get_errno())))\n"
    "os.close(fd)\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n"
)


def start_in_netns(ns_name, argv, keep_mounts=False, **popen_kwargs):
    """Starts argv inside ns_name with `ip netns exec` (or, keep_mounts=True, with a bare
    setns(2) that keeps the test's mounts, e.g. /sys/fs/bpf), exec'ing the command in place,
    so Popen.pid is the command's own pid (signals reach it directly). The process gets
    PR_SET_PDEATHSIG=SIGKILL first, so it cannot outlive the test."""
    if keep_mounts:
        cmd = ["/usr/bin/python3", "-c", _LAUNCHER_SETNS, str(os.getpid()),
               os.path.join(NETNS_DIR, ns_name)] + list(argv)
    else:
        cmd = ["/usr/bin/python3", "-c", _LAUNCHER, str(os.getpid()), "ip", "netns", "exec", ns_name] + list(argv)
    with _lock:
        proc = subprocess.Popen(cmd, **popen_kwargs)
        _processes.append(proc)
    return proc


def forget_process(proc):
    _unregister(_processes, proc)


# ---------------------------------------------------------------------------- topology

class Topology:
    """Context manager: creates client/relay/xcvr namespaces wired with two veth pairs;
    removes them (and every process started in them) on exit, also on failure."""

    def __init__(self, tag=None):
        self.prefix = "%s%d-%s" % (NS_PREFIX, os.getpid(), tag or "t")
        self.client = self.prefix + "-client"
        self.relay = self.prefix + "-relay"
        self.xcvr = self.prefix + "-xcvr"

    @property
    def names(self):
        return [self.client, self.relay, self.xcvr]

    def __enter__(self):
        try:
            self._create()
        except BaseException:
            cleanup_all()
            raise
        return self

    def __exit__(self, *exc):
        cleanup_all()
        return False

    def create(self):
        """Creates the namespaces; on failure removes only this topology's namespaces (not
        everything cleanup_all() knows about) and re-raises."""
        try:
            self._create()
        except BaseException:
            self.destroy()
            raise
        return self

    def destroy(self):
        """Deletes this topology's namespaces and whatever still runs in them."""
        for name in reversed(self.names):
            with _lock:
                if name not in _namespaces:
                    continue
                _namespaces.remove(name)
            for pid in run(["ip", "netns", "pids", name], check=False).stdout.split():
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), signal.SIGKILL)
            run(["ip", "netns", "del", name], check=False)

    def _ip(self, ns, *args):
        return run(["ip", "-n", ns] + list(args))

    def _create(self):
        for ns in self.names:
            with _lock:
                run(["ip", "netns", "add", ns])
                _namespaces.append(ns)
            # No duplicate address detection: addresses are usable at once.
            run(["ip", "netns", "exec", ns, "sysctl", "-qw",
                 "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"])
            self._ip(ns, "link", "set", "lo", "up")
        # Create each veth pair directly inside its namespaces: the root namespace never
        # sees these interfaces.
        run(["ip", "link", "add", "cl0", "netns", self.client, "type", "veth", "peer", "name", "rc0", "netns", self.relay])
        run(["ip", "link", "add", "rx0", "netns", self.relay, "type", "veth", "peer", "name", "xc0", "netns", self.xcvr])
        plan = [
            (self.client, "cl0", [CLIENT_V4 + "/24"], [CLIENT_V6 + "/64"]),
            (self.relay, "rc0", [RELAY_LINK_V4 + "/24", VIP_V4 + "/32"], [RELAY_LINK_V6 + "/64", VIP_V6 + "/128"]),
            (self.relay, "rx0", [RELAY_XCVR_V4 + "/24"], [RELAY_XCVR_V6 + "/64"]),
            (self.xcvr, "xc0", [XCVR_V4 + "/24"], [XCVR_V6 + "/64"]),
        ]
        for ns, dev, v4s, v6s in plan:
            for a in v4s:
                self._ip(ns, "addr", "add", a, "dev", dev)
            for a in v6s:
                self._ip(ns, "-6", "addr", "add", a, "dev", dev, "nodad")
            self._ip(ns, "link", "set", dev, "up")
        self._ip(self.client, "route", "add", VIP_V4 + "/32", "via", RELAY_LINK_V4, "dev", "cl0")
        self._ip(self.client, "-6", "route", "add", VIP_V6 + "/128", "via", RELAY_LINK_V6, "dev", "cl0")
        self._wait_links([(ns, dev) for ns, dev, _, _ in plan])

    def _wait_links(self, links, timeout=5.0):
        deadline = time.monotonic() + timeout
        pending = list(links)
        while pending:
            still = []
            for ns, dev in pending:
                info = json.loads(self._ip(ns, "-j", "addr", "show", "dev", dev).stdout)[0]
                tentative = any(a.get("tentative") for a in info.get("addr_info", []))
                if info.get("operstate") != "UP" or tentative:
                    still.append((ns, dev))
            pending = still
            if pending and time.monotonic() > deadline:
                raise RuntimeError("links not up within %.0fs: %s" % (timeout, pending))
            if pending:
                time.sleep(0.02)  # poll interval of a deadline-bounded wait

    # ------------------------------------------------------------------ XDP data path

    @property
    def veths(self):
        return [(self.client, "cl0"), (self.relay, "rc0"), (self.relay, "rx0"), (self.xcvr, "xc0")]

    def prepare_for_xdp(self, xdp_pass_obj):
        """What the relay's XDP program needs from this topology (docs/operations.md):
        - an XDP program on the peer ends cl0 and xc0 (a frame XDP_TX'd or redirected into a
          veth is only delivered if the receiving end runs XDP; xdp_pass.bpf.o will do);
        - TX checksum offload off on the veths (partial checksums are wrong after the
          program's incremental update);
        - IP forwarding in the relay namespace (bpf_fib_lookup refuses without it);
        - routes from the client to the relay's transceiver-side addresses (the forged
          return-path test sends there from the client namespace);
        - resolved neighbours (warm_neighbours), so that the first packet takes XDP too.
        Raises RuntimeError saying what failed."""
        for ns, dev in ((self.client, "cl0"), (self.xcvr, "xc0")):
            self._ip(ns, "link", "set", "dev", dev, "xdpdrv", "obj", xdp_pass_obj, "sec", "xdp")
        for ns, dev in self.veths:
            run(["ip", "netns", "exec", ns, "ethtool", "-K", dev, "tx", "off"])
        run(["ip", "netns", "exec", self.relay, "sysctl", "-qw", "net.ipv4.conf.all.forwarding=1",
             "net.ipv6.conf.all.forwarding=1"])
        self._ip(self.client, "route", "add", RELAY_XCVR_V4 + "/32", "via", RELAY_LINK_V4, "dev", "cl0")
        self._ip(self.client, "-6", "route", "add", RELAY_XCVR_V6 + "/128", "via", RELAY_LINK_V6, "dev", "cl0")
        self.warm_neighbours()

    def neighbours(self, ns, dev):
        """{address: state} of dev's neighbour table in ns."""
        out = {}
        for fam in ("-4", "-6"):
            for e in json.loads(self._ip(ns, fam, "-j", "neigh", "show", "dev", dev).stdout or "[]"):
                out[e["dst"]] = (e.get("state") or ["NONE"])[0]
        return out

    def warm_neighbours(self, timeout=5.0):
        """Makes the relay namespace resolve its peers (a datagram to the discard port of
        each; what comes back is an ICMP error, ignored) and waits until their neighbour
        entries are usable (bpf_fib_lookup takes REACHABLE, STALE, DELAY, PROBE)."""
        usable = {"REACHABLE", "STALE", "DELAY", "PROBE", "PERMANENT"}
        want = [("rx0", XCVR_V4), ("rx0", XCVR_V6), ("rc0", CLIENT_V4), ("rc0", CLIENT_V6)]
        socks = {}
        try:
            for _, ip in want:
                fam = socket.AF_INET6 if ":" in ip else socket.AF_INET
                if fam not in socks:
                    socks[fam] = socket_in(self.relay, fam)
                socks[fam].sendto(b"rtce-it neighbour probe", (ip, 9))
            deadline = time.monotonic() + timeout
            while True:
                tables = {dev: self.neighbours(self.relay, dev) for dev in ("rx0", "rc0")}
                missing = [(dev, ip) for dev, ip in want if tables[dev].get(ip) not in usable]
                if not missing:
                    return
                if time.monotonic() > deadline:
                    raise RuntimeError("neighbours not resolved within %.0fs: %s (tables %s)" % (timeout, missing, tables))
                time.sleep(0.02)  # poll interval of a deadline-bounded wait
        finally:
            for sock in socks.values():
                sock.close()

    def xdp_attached(self, ns, dev):
        """The `xdp` object `ip -j link show` reports for dev (None when no program)."""
        info = json.loads(self._ip(ns, "-j", "link", "show", "dev", dev).stdout)[0]
        return info.get("xdp")
