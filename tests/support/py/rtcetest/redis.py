"""Redis for tests, real processes on 127.0.0.1 (free ports, temporary directories, killed by stop()
and when this process dies): the Python twins of tests/support/redis_server.h and redis_topology.h.

- RedisServer: one redis-server, ready (PING answered) when the constructor returns; optional TLS
  (a TestCertificates) and password.
- TestCertificates: a CA, server/client certificates signed by it (server: IP:127.0.0.1,
  DNS:redis.test), one signed by it but expired, and an unrelated CA; made with the openssl CLI.
- RedisSentinelGroup: a master, replicas and sentinels (master name "rtce", quorum 2, failover in a
  few seconds); url() is redis+sentinel://.
- RedisClusterNodes: a Redis Cluster made with redis-cli --cluster create; url() is redis+cluster://.

Every stop() kills what was started and removes the directories, also after a failed start.
Every wait has a deadline (AssertionError naming what was awaited).

`prefix` (every class; default none) is a command prefix for every redis-server and redis-cli
they run, e.g. ["ip", "netns", "exec", ns] to run them inside a network namespace (127.0.0.1
is then that namespace's loopback). The prefix must exec the command in place (ip netns exec
does), so that the process started is the server itself. Ports are still picked free here."""

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from rtcetest.core import free_port, poll_until, wait_for

REDIS_SERVER = "/usr/bin/redis-server"
REDIS_CLI = "/usr/bin/redis-cli"
REDIS_SENTINEL = "/usr/bin/redis-sentinel"
OPENSSL = "/usr/bin/openssl"

_PR_SET_PDEATHSIG = 1


def _die_with_parent():
    """preexec_fn: SIGKILL the child when its parent dies (never outlive a crashed test)."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def free_cluster_port():
    """A free port whose cluster bus port (+10000) is free too."""
    for _ in range(200):
        port = free_port()
        if port + 10000 > 65535:
            continue
        with socket.socket() as bus:
            try:
                bus.bind(("127.0.0.1", port + 10000))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port with a free cluster bus port")


def _info_field(text, field):
    for line in (text or "").splitlines():
        if line.startswith(field + ":"):
            return line[len(field) + 1:].strip()
    return None


class TestCertificates:
    """EC P-256 keys and certificates in a temporary directory (`dir`); stop() removes it."""

    __test__ = False  # not a test case, whatever a collector thinks of the name

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rtce-certs-")
        p = lambda name: os.path.join(self.dir, name)  # noqa: E731
        self.ca_cert, self.ca_key = p("ca.crt"), p("ca.key")
        self.server_cert, self.server_key = p("server.crt"), p("server.key")
        self.client_cert, self.client_key = p("client.crt"), p("client.key")
        self.other_ca_cert, self.other_ca_key = p("other-ca.crt"), p("other-ca.key")
        self.expired_cert, self.expired_key = p("expired.crt"), p("expired.key")
        try:
            self._generate()
        except BaseException:
            self.stop()
            raise

    def _openssl(self, *args):
        r = subprocess.run([OPENSSL, *args], capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise RuntimeError(f"openssl {args[0]} failed: {r.stderr}")

    def _generate(self):
        # Our own config: nothing depends on the machine's openssl.cnf, and `openssl ca` (the only
        # OpenSSL 3.0 command that signs with a chosen start and end date) needs its database.
        config = os.path.join(self.dir, "openssl.cnf")
        os.mkdir(os.path.join(self.dir, "newcerts"))
        open(os.path.join(self.dir, "index.txt"), "w").close()
        with open(os.path.join(self.dir, "serial"), "w") as f:
            f.write("1000\n")
        with open(config, "w") as f:
            f.write(f"""[req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca_ext]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[server_ext]
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectAltName = IP:127.0.0.1, DNS:redis.test
[client_ext]
basicConstraints = CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = clientAuth
[ca]
default_ca = test_ca
[test_ca]
database = {self.dir}/index.txt
new_certs_dir = {self.dir}/newcerts
serial = {self.dir}/serial
default_md = sha256
policy = policy_any
unique_subject = no
copy_extensions = none
[policy_any]
commonName = supplied
""")
        ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]
        for key, cert, cn in ((self.ca_key, self.ca_cert, "rtce test CA"),
                              (self.other_ca_key, self.other_ca_cert, "rtce unrelated CA")):
            self._openssl("req", "-config", config, "-x509", *ec, "-keyout", key, "-out", cert, "-days", "3650",
                          "-subj", "/CN=" + cn, "-extensions", "ca_ext")
        for key, cert, cn, serial, ext in ((self.server_key, self.server_cert, "redis.test", "2", "server_ext"),
                                           (self.client_key, self.client_cert, "rtce-test-client", "3", "client_ext")):
            csr = cert[:-4] + ".csr"
            self._openssl("req", "-config", config, "-new", *ec, "-keyout", key, "-out", csr, "-subj", "/CN=" + cn)
            self._openssl("x509", "-req", "-in", csr, "-CA", self.ca_cert, "-CAkey", self.ca_key, "-set_serial", serial,
                          "-days", "3650", "-sha256", "-extfile", config, "-extensions", ext, "-out", cert)
        csr = os.path.join(self.dir, "expired.csr")
        self._openssl("req", "-config", config, "-new", *ec, "-keyout", self.expired_key, "-out", csr,
                      "-subj", "/CN=redis.test")
        self._openssl("ca", "-config", config, "-batch", "-notext", "-in", csr, "-out", self.expired_cert,
                      "-cert", self.ca_cert, "-keyfile", self.ca_key, "-startdate", "20200101000000Z",
                      "-enddate", "20200102000000Z", "-extensions", "server_ext")

    @staticmethod
    def expired(path):
        """openssl x509 -checkend 0: whether the certificate has expired now."""
        return subprocess.run([OPENSSL, "x509", "-in", path, "-noout", "-checkend", "0"],
                              capture_output=True, timeout=10).returncode == 1

    def stop(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisServer:
    """A redis-server on a free loopback port (`port`; with tls the TLS port, plaintext port 0 unless
    tls_only=False, then `plain_port`), no persistence, in its own temporary directory (`dir`, kept
    across kill()/start()). `config` is written to dir/redis.conf and passed first (a sentinel
    rewrites it). Started (PING answered) by the constructor unless start=False."""

    def __init__(self, tls=None, password=None, port=None, extra_args=(), tls_only=True, tls_auth_clients=False,
                 config=None, sentinel=False, start=True, prefix=()):
        self.prefix = list(prefix)
        self.tls = tls
        self.password = password
        self.port = port or free_port()
        self.plain_port = free_port() if tls is not None and not tls_only else 0
        self.tls_auth_clients = tls_auth_clients
        self.extra_args = list(extra_args)
        self.sentinel = sentinel
        self.url = f"{'rediss' if tls is not None else 'redis'}://127.0.0.1:{self.port}"
        self.dir = tempfile.mkdtemp(prefix="rtce-redis-")
        self.config = None
        if config is not None:
            self.config = os.path.join(self.dir, "redis.conf")
            with open(self.config, "w") as f:
                f.write(config)
        self.proc = None
        self._log = None
        if start:
            try:
                self.start()
            except BaseException:
                self.stop()
                raise

    def start(self, timeout=10):
        """Spawns the server (again, same port and directory) and waits until it answers PING."""
        if self.running:
            return self
        # A sentinel runs as Debian's redis-sentinel where installed (what operators run).
        sentinel_binary = self.sentinel and os.access(REDIS_SENTINEL, os.X_OK)
        args = [REDIS_SENTINEL if sentinel_binary else REDIS_SERVER]
        if self.config:
            args.append(self.config)
        if self.sentinel and not sentinel_binary:
            args.append("--sentinel")
        args += ["--port", str(self.plain_port if self.tls is not None else self.port), "--bind", "127.0.0.1",
                 "--daemonize", "no", "--dir", self.dir]
        if not self.sentinel:
            args += ["--save", "", "--appendonly", "no"]
        if self.tls is not None:
            args += ["--tls-port", str(self.port), "--tls-cert-file", self.tls.server_cert,
                     "--tls-key-file", self.tls.server_key, "--tls-ca-cert-file", self.tls.ca_cert,
                     "--tls-auth-clients", "yes" if self.tls_auth_clients else "no"]
        if self.password:
            args += ["--requirepass", self.password]
        args += self.extra_args
        if self._log is None:
            self._log = open(os.path.join(self.dir, "redis.log"), "ab")
        self.proc = subprocess.Popen(self.prefix + args, stdout=self._log, stderr=self._log, stdin=subprocess.DEVNULL,
                                     preexec_fn=_die_with_parent)
        if not poll_until(lambda: self.cli("PING") == "PONG" or self.proc.poll() is not None, timeout) \
                or self.proc.poll() is not None:
            self.kill()
            raise AssertionError(f"redis-server on {self.port} did not answer PING (log: {self.dir}/redis.log)")
        return self

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        """SIGKILL and reap (a no-op when not running)."""
        if self.proc is not None:
            if self.proc.poll() is None:
                os.kill(self.proc.pid, signal.SIGCONT)
                self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def pause(self):
        if self.running:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self):
        if self.running:
            self.proc.send_signal(signal.SIGCONT)

    def cli_args(self):
        """redis-cli and the options that reach this server (TLS, auth)."""
        args = [REDIS_CLI, "-h", "127.0.0.1", "-p", str(self.port)]
        if self.tls is not None:
            args += ["--tls", "--cacert", self.tls.ca_cert]
            if self.tls_auth_clients:
                args += ["--cert", self.tls.client_cert, "--key", self.tls.client_key]
        if self.password:
            args += ["--no-auth-warning", "-a", self.password]
        return args

    def cli(self, *args):
        """redis-cli's stripped (raw: one array element a line) output, or None when it failed. An
        error reply is output too (ERR ..., MOVED ...)."""
        try:
            r = subprocess.run([*self.prefix, *self.cli_args(), *args], capture_output=True, text=True, timeout=10)
        except subprocess.TimeoutExpired:
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    def hash(self, key):
        out = self.cli("HGETALL", key)
        if not out:
            return {}
        items = out.split("\n")
        return dict(zip(items[0::2], items[1::2]))

    def role(self):
        out = self.cli("ROLE")
        return out.split("\n")[0] if out else None

    def stop(self):
        try:
            self.kill()
        finally:
            if self._log is not None:
                self._log.close()
                self._log = None
            shutil.rmtree(self.dir, ignore_errors=True)


def _stop_all(servers):
    for server in servers:
        try:
            server.stop()
        except Exception:  # noqa: BLE001 - stop the others whatever one did
            pass


class RedisSentinelGroup:
    """A master (data_nodes[0]), `replicas` replicas and `sentinels` sentinels monitoring
    `master_name` (quorum 2, down-after 1000 ms, failover-timeout 5000 ms); optional TLS everywhere
    and a password on the data nodes. start() returns once every sentinel sees the master, all
    replicas and all other sentinels."""

    def __init__(self, replicas=1, sentinels=3, master_name="rtce", password=None, tls=None, prefix=()):
        self.prefix = list(prefix)
        self.replicas = replicas
        self.master_name = master_name
        self.password = password
        self.tls = tls
        self.data_nodes = []
        self.sentinels = []
        self._sentinel_ports = [free_port() for _ in range(sentinels)]

    def url(self):
        scheme = "rediss+sentinel" if self.tls is not None else "redis+sentinel"
        return f"{scheme}://" + ",".join(f"127.0.0.1:{p}" for p in self._sentinel_ports) + "/" + self.master_name

    def start(self, timeout=20):
        deadline = time.monotonic() + timeout
        try:
            # A replica's full sync starts at once (the diskless default waits 5 s for more replicas).
            common = ["--repl-diskless-sync-delay", "0"]
            if self.password:
                common += ["--masterauth", self.password]
            if self.tls is not None:
                common += ["--tls-replication", "yes"]
            self.data_nodes.append(RedisServer(tls=self.tls, password=self.password, extra_args=common,
                                               prefix=self.prefix))
            master = self.data_nodes[0].port
            for _ in range(self.replicas):
                self.data_nodes.append(RedisServer(tls=self.tls, password=self.password, prefix=self.prefix,
                                                   extra_args=common + ["--replicaof", "127.0.0.1", str(master)]))
            # Replicas linked before the sentinels start: a sentinel learns them from the master's
            # INFO, which it asks every 10 s after the first time.
            wait_for(lambda: _info_field(self.data_nodes[0].cli("INFO", "replication"), "connected_slaves")
                     == str(self.replicas) and all(_info_field(n.cli("INFO", "replication"), "master_link_status")
                                                   == "up" for n in self.data_nodes[1:]),
                     max(0.1, deadline - time.monotonic()), "the replicas' links")
            name = self.master_name
            quorum = min(2, max(1, len(self._sentinel_ports)))
            conf = (f"sentinel resolve-hostnames no\nsentinel monitor {name} 127.0.0.1 {master} {quorum}\n"
                    f"sentinel down-after-milliseconds {name} 1000\nsentinel failover-timeout {name} 5000\n"
                    f"sentinel parallel-syncs {name} 1\n")
            if self.password:
                conf += f"sentinel auth-pass {name} {self.password}\n"
            for port in self._sentinel_ports:
                self.sentinels.append(RedisServer(tls=self.tls, port=port, config=conf, sentinel=True,
                                                  extra_args=["--tls-replication", "yes"] if self.tls else [],
                                                  prefix=self.prefix))
            wait_for(self._sentinels_agree, max(0.1, deadline - time.monotonic()),
                     "every sentinel to see the master, the replicas and the other sentinels")
        except BaseException:
            self.stop()
            raise
        return self

    def _sentinels_agree(self):
        for sentinel in self.sentinels:
            out = sentinel.cli("SENTINEL", "master", self.master_name)
            if not out:
                return False
            items = out.split("\n")
            fields = dict(zip(items[0::2], items[1::2]))
            if fields.get("flags") != "master" or fields.get("num-slaves") != str(self.replicas) or \
                    fields.get("num-other-sentinels") != str(len(self.sentinels) - 1):
                return False
        return True

    def _named_ports(self):
        ports = []
        for sentinel in self.sentinels:
            if sentinel.running:
                out = sentinel.cli("SENTINEL", "get-master-addr-by-name", self.master_name)
                lines = out.split("\n") if out else []
                ports.append(int(lines[1]) if len(lines) == 2 and lines[1].isdigit() else 0)
        return ports

    def master_port(self):
        """The current master's port as the first answering sentinel names it, 0 when none does."""
        return next((p for p in self._named_ports() if p), 0)

    def data_node(self, i):
        return self.data_nodes[i]

    def sentinel(self, i):
        return self.sentinels[i]

    def node_by_port(self, port):
        return next((n for n in self.data_nodes + self.sentinels if n.port == port), None)

    def kill_master(self):
        """SIGKILLs the current master; its port (0: none)."""
        port = self.master_port()
        node = self.node_by_port(port)
        if node is None or not node.running:
            return 0
        node.kill()
        return port

    def wait_for_failover(self, old_port, timeout=20):
        """Waits until every running sentinel names one master other than old_port and it answers
        ROLE as master; returns its port."""
        def promoted():
            ports = set(self._named_ports())
            if len(ports) != 1 or 0 in ports or old_port in ports:
                return 0
            port = ports.pop()
            node = self.node_by_port(port)
            return port if node is not None and node.running and node.role() == "master" else 0
        return wait_for(promoted, timeout, f"a failover away from {old_port}")

    def restart(self, port, timeout=10):
        """Starts a killed data node or sentinel again; a data node follows the current master at
        once (the sentinels would convert it too, after 8 s)."""
        node = self.node_by_port(port)
        if node is None:
            raise KeyError(port)
        node.start(timeout)
        master = self.master_port()
        if node in self.data_nodes and master and master != port:
            if node.cli("REPLICAOF", "127.0.0.1", str(master)) != "OK":
                raise AssertionError(f"REPLICAOF on {port} failed")
        return node

    def stop(self):
        _stop_all(self.sentinels + self.data_nodes)


class RedisClusterNodes:
    """`masters` masters with `replicas_per_master` replicas each (cluster-node-timeout 1000), made
    with redis-cli --cluster create; optional TLS (bus and replication too) and password. Nodes in
    creation order: the first `masters` are the masters."""

    def __init__(self, masters=3, replicas_per_master=0, password=None, tls=None, prefix=()):
        self.prefix = list(prefix)
        self.masters = masters
        self.replicas_per_master = replicas_per_master
        self.password = password
        self.tls = tls
        self.nodes = []
        self._ports = [free_cluster_port() for _ in range(masters * (1 + replicas_per_master))]

    def url(self):
        scheme = "rediss+cluster" if self.tls is not None else "redis+cluster"
        return f"{scheme}://" + ",".join(f"127.0.0.1:{p}" for p in self._ports[:2])

    def size(self):
        return len(self._ports)

    def node(self, i):
        return self.nodes[i]

    def start(self, timeout=20):
        deadline = time.monotonic() + timeout
        try:
            args = ["--cluster-enabled", "yes", "--cluster-node-timeout", "1000", "--cluster-config-file",
                    "nodes.conf", "--repl-diskless-sync-delay", "0"]
            if self.password:
                args += ["--masterauth", self.password]
            if self.tls is not None:
                args += ["--tls-cluster", "yes", "--tls-replication", "yes"]
            for port in self._ports:
                self.nodes.append(RedisServer(tls=self.tls, password=self.password, port=port, extra_args=args,
                                              prefix=self.prefix))
            cli = self.nodes[0].cli_args()
            create = [*self.prefix, cli[0], "--cluster", "create", *(f"127.0.0.1:{p}" for p in self._ports), *cli[5:],
                      "--cluster-replicas", str(self.replicas_per_master), "--cluster-yes"]
            r = subprocess.run(create, capture_output=True, text=True, timeout=max(1, deadline - time.monotonic()))
            if r.returncode != 0:
                raise AssertionError(f"redis-cli --cluster create failed: {r.stdout}{r.stderr}")

            def ready():
                for n in self.nodes:
                    info = n.cli("CLUSTER", "INFO")
                    if _info_field(info, "cluster_state") != "ok" or \
                            _info_field(info, "cluster_slots_assigned") != "16384" or \
                            _info_field(info, "cluster_known_nodes") != str(len(self.nodes)):
                        return False
                    repl = n.cli("INFO", "replication")
                    if _info_field(repl, "role") == "slave" and _info_field(repl, "master_link_status") != "up":
                        return False
                return True
            wait_for(ready, max(0.1, deadline - time.monotonic()), "cluster_state:ok on every node")
        except BaseException:
            self.stop()
            raise
        return self

    def kill(self, i):
        self.nodes[i].kill()

    def restart(self, i, timeout=10):
        """Starts a killed node again with its nodes.conf: it rejoins."""
        return self.nodes[i].start(timeout)

    def wait_state_ok(self, timeout=10):
        """Every running node: cluster_state:ok, 16384 slots assigned."""
        def ok():
            for n in self.nodes:
                if n.running:
                    info = n.cli("CLUSTER", "INFO")
                    if _info_field(info, "cluster_state") != "ok" or \
                            _info_field(info, "cluster_slots_assigned") != "16384":
                        return False
            return True
        return wait_for(ok, timeout, "cluster_state:ok")

    @staticmethod
    def _parse_nodes(text):
        """[(id, port, is_live_master, [(first, last), ...])] from CLUSTER NODES."""
        out = []
        for line in (text or "").splitlines():
            f = line.split()
            if len(f) < 8:
                continue
            port = int(f[1].split("@")[0].rsplit(":", 1)[1])
            flags = f[2].split(",")
            ranges = []
            for s in f[8:]:
                if s.startswith("["):
                    continue  # [slot->-importing] / [slot-<-migrating]
                a, _, b = s.partition("-")
                ranges.append((int(a), int(b or a)))
            out.append((f[0], port, "master" in flags and "fail" not in flags, ranges))
        return out

    def _nodes_text(self, node=None):
        for n in [node] if node is not None else self.nodes:
            if n.running:
                text = n.cli("CLUSTER", "NODES")
                if text:
                    return text
        return ""

    @classmethod
    def _owner(cls, text, slot):
        for _, port, live_master, ranges in cls._parse_nodes(text):
            if live_master and any(a <= slot <= b for a, b in ranges):
                return port
        return 0

    def master_of_slot(self, slot):
        """The port of the master serving `slot`, 0 if unknown."""
        return self._owner(self._nodes_text(), slot)

    def index_of_port(self, port):
        return self._ports.index(port) if port in self._ports else len(self._ports)

    def migrate_slots(self, first, last, to_index, timeout=10):
        """Moves slots first..last with their keys to master `to_index` (SETSLOT IMPORTING/MIGRATING,
        MIGRATE ... KEYS, SETSLOT NODE on every master); waits until every running node agrees."""
        deadline = time.monotonic() + timeout
        to = self.nodes[to_index]
        to_id = to.cli("CLUSTER", "MYID")
        for slot in range(first, last + 1):
            src_index = self.index_of_port(self.master_of_slot(slot))
            if src_index == to_index:
                continue
            src = self.nodes[src_index]
            src_id = src.cli("CLUSTER", "MYID")
            s = str(slot)
            if to.cli("CLUSTER", "SETSLOT", s, "IMPORTING", src_id) != "OK" or \
                    src.cli("CLUSTER", "SETSLOT", s, "MIGRATING", to_id) != "OK":
                raise AssertionError(f"SETSLOT IMPORTING/MIGRATING of slot {slot} failed")
            while True:
                keys = src.cli("CLUSTER", "GETKEYSINSLOT", s, "100")
                if not keys:
                    break
                migrate = ["MIGRATE", "127.0.0.1", str(to.port), "", "0", "5000"]
                if self.password:
                    migrate += ["AUTH", self.password]
                if src.cli(*migrate, "KEYS", *keys.split("\n")) not in ("OK", "NOKEY"):
                    raise AssertionError(f"MIGRATE of slot {slot} failed")
                if time.monotonic() > deadline:
                    raise AssertionError(f"timed out migrating slot {slot}")
            # The target first (it owns the slot from then on), then the source, then the others.
            for n in [to, src] + [self.nodes[self.index_of_port(port)]
                                  for _, port, live_master, _ in self._parse_nodes(self._nodes_text())
                                  if live_master and port not in (to.port, src.port)]:
                if n.running and n.cli("CLUSTER", "SETSLOT", s, "NODE", to_id) != "OK" and n in (to, src):
                    raise AssertionError(f"SETSLOT NODE of slot {slot} failed")
        wait_for(lambda: all(self._owner(self._nodes_text(n), s) == to.port
                             for n in self.nodes if n.running for s in (first, last)),
                 max(0.1, deadline - time.monotonic()), f"every node to see slots {first}-{last} on {to.port}")
        return True

    def failover_replica(self, i, timeout=10):
        """CLUSTER FAILOVER on replica i; waits until it is a master and the cluster is ok."""
        deadline = time.monotonic() + timeout
        replica = self.nodes[i]
        if replica.role() != "slave":
            raise AssertionError(f"node {i} is not a replica")
        if replica.cli("CLUSTER", "FAILOVER") != "OK":
            raise AssertionError("CLUSTER FAILOVER failed")
        wait_for(lambda: replica.role() == "master", max(0.1, deadline - time.monotonic()), f"node {i} promoted")
        return self.wait_state_ok(max(0.1, deadline - time.monotonic()))

    def stop(self):
        _stop_all(self.nodes)
