"""Deployment artefacts (issue 6): Kubernetes manifests, the systemd unit, the LSB init
script, the man pages, the example configuration and `meson install`.

Self-contained but for spurtest.wait_until: stdlib, pytest and PyYAML. The programs
come from the build directory named by SPUR_BUILD_DIR (default: <repo>/build; a relative
path is taken from the current directory, as in spurtest.py). Tests that need a program,
a tool or root skip with the reason.

Processes run on 127.0.0.1 with ports the kernel hands out, in temporary directories;
every process a test starts is found again by its temporary path (command line or
environment) and killed when the test ends, pass or fail.
"""

import contextlib
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

import spurtest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("SPUR_BUILD_DIR", REPO / "build")).resolve()
SPURCTLD = BUILD / "supervisor" / "spurctld"
RAFTD = BUILD / "raftd" / "spurctld-raftd"

EXAMPLES = REPO / "examples"
K8S = EXAMPLES / "k8s"
UNIT_TEMPLATE = EXAMPLES / "systemd" / "spurctld.service.in"
INIT_SCRIPT = EXAMPLES / "init.d" / "spurctld"
MAN = REPO / "man"
MAN_PAGES = sorted(p for p in MAN.glob("*.[1-8]"))

# The routes common/http.c serves; everything else is 404.
RESPONDER_ROUTES = {"/healthz", "/livez", "/readyz"}
# What the supervisor needs after SIGABRT before SIGKILL (sup.c ABORT_TO_KILL_MS), and
# to reap everything on the way out (FINAL_REAP_MS): margins for the timeouts below.
ABORT_TO_KILL_MS = 1000
FINAL_REAP_MS = 2000

WAIT = 15.0  # upper bound for anything a test waits for


# ---- helpers ---------------------------------------------------------------------------


def need_programs():
    for p in (SPURCTLD, RAFTD):
        if not os.access(p, os.X_OK):
            pytest.skip(f"{p} is not built: run `meson setup {BUILD.name} && meson compile "
                        f"-C {BUILD.name}` or set SPUR_BUILD_DIR")


def need_tool(name):
    path = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if path is None:
        pytest.skip(f"{name} is not installed")
    return path


def wait_until(pred, timeout=WAIT, interval=0.05, what="condition"):
    """spurtest.wait_until with this file's bounds; a timeout fails as an assertion."""
    try:
        return spurtest.wait_until(pred, timeout, interval, what)
    except TimeoutError as e:
        raise AssertionError(str(e)) from None


def free_ports(n):
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def http_get(port, path, timeout=2.0):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def try_get(port, path):
    try:
        return http_get(port, path)
    except OSError:
        return None


def check_config(path, *extra):
    return subprocess.run([str(SPURCTLD), "--check-config", "-f", str(path), *extra],
                          capture_output=True, text=True, timeout=30)


def effective(path):
    r = check_config(path)
    assert r.returncode == 0, f"--check-config {path} failed: {r.stderr}"
    return yaml.safe_load(r.stdout)


def flatten(cfg, prefix=""):
    """Dotted leaf keys -> values; a list of mappings contributes its mappings' keys."""
    out = {}
    for k, v in cfg.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "."))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for item in v:
                out.update(flatten(item, key + "."))
        else:
            out[key] = v
    return out


def accepted_keys(tmp_path):
    """Every key the loader accepts: what --check-config prints for an empty file."""
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    return set(flatten(effective(empty)))


def private_config(tmp_path, ports, **sections):
    """A one-replica configuration on loopback, private ports and state dir."""
    client, raft, health, metrics = ports
    cfg = {
        "controller": {
            "listen": f"127.0.0.1:{client}",
            "state_dir": str(tmp_path / "state"),
            "peers": [f"127.0.0.1:{raft}"],
            "hosts": [f"127.0.0.1:{client}"],
        },
        "raft": {"listen": f"127.0.0.1:{raft}"},
        "health": {"enabled": True, "bind": "loopback", "port": health},
        "metrics": {"bind": "loopback", "port": metrics},
    }
    for k, v in sections.items():
        cfg.setdefault(k, {}).update(v)
    return yaml.safe_dump(cfg, sort_keys=False)


def processes_marked(marker):
    """Pids (not ours) whose command line or environment mentions marker."""
    found = []
    me = os.getpid()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == me:
            continue
        for f in ("cmdline", "environ"):
            try:
                data = (d / f).read_bytes()
            except OSError:
                continue
            if marker.encode() in data:
                found.append(int(d.name))
                break
    return found


def kill_marked(marker):
    for pid in processes_marked(marker):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    with contextlib.suppress(AssertionError):
        wait_until(lambda: not processes_marked(marker), timeout=5, what="cleanup")


@contextlib.contextmanager
def running(argv, log_path, marker, env=None):
    """Run argv with stderr to log_path; on exit SIGTERM, then SIGKILL anything left."""
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                env=env)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=WAIT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        kill_marked(marker)


def k8s_objects():
    objs = []
    for f in sorted(K8S.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if doc is not None:
                objs.append((f.name, doc))
    return objs


def k8s(kind, name=None):
    found = [d for _, d in k8s_objects()
             if d.get("kind") == kind and (name is None or d["metadata"]["name"] == name)]
    assert found, f"no {kind} {name or ''} in {K8S}"
    return found


def statefulset():
    (sts,) = k8s("StatefulSet")
    return sts


def named_container(obj, name):
    """The container called name of a workload's pod template."""
    (c,) = [c for c in obj["spec"]["template"]["spec"]["containers"] if c["name"] == name]
    return c


def container(sts=None):
    return named_container(sts or statefulset(), "spurctld")


def embedded_config_text():
    """spur.yaml from the ConfigMap (or Secret) the StatefulSet mounts."""
    for kind in ("ConfigMap", "Secret"):
        for _, d in k8s_objects():
            if d.get("kind") != kind:
                continue
            data = d.get("data") or d.get("stringData") or {}
            if "spur.yaml" in data:
                return data["spur.yaml"]
    raise AssertionError("no ConfigMap or Secret with a spur.yaml key")


def embedded_config():
    return yaml.safe_load(embedded_config_text())


def resolve_port(c, port):
    if isinstance(port, int):
        return port
    for p in c.get("ports", []):
        if p.get("name") == port:
            return p["containerPort"]
    raise AssertionError(f"container port {port!r} is not declared")


def probes(c):
    return {kind: c[kind] for kind in ("startupProbe", "livenessProbe", "readinessProbe")
            if kind in c}


def port_of(hostport):
    return int(hostport.rsplit(":", 1)[1])


# ---- Kubernetes ------------------------------------------------------------------------


def test_k8s_manifests_parse():
    objs = k8s_objects()
    assert objs, f"no manifests in {K8S}"
    for fname, d in objs:
        assert isinstance(d, dict), f"{fname}: a document is not a mapping"
        assert d.get("apiVersion") and d.get("kind"), f"{fname}: apiVersion/kind missing"
        if d["kind"] != "Kustomization":
            assert d.get("metadata", {}).get("name"), f"{fname}: {d['kind']} has no name"
    kinds = sorted(d["kind"] for _, d in objs)
    for kind in ("StatefulSet", "PodDisruptionBudget"):
        assert kinds.count(kind) == 1, kinds
    assert kinds.count("Service") == 2, kinds
    assert "ConfigMap" in kinds or "Secret" in kinds, kinds
    # The kustomization lists every manifest.
    for _, d in objs:
        if d["kind"] == "Kustomization":
            listed = set(d["resources"])
            files = {f.name for f in K8S.glob("*.yaml")} - {"kustomization.yaml"}
            assert listed == files, (listed, files)


def test_headless_service_publishes_not_ready_addresses():
    (svc,) = k8s("Service", "spurctld")
    spec = svc["spec"]
    assert spec.get("clusterIP") == "None", "the peer Service must be headless"
    assert spec.get("publishNotReadyAddresses") is True
    assert statefulset()["spec"]["serviceName"] == "spurctld"


def test_client_service_drops_unready_replicas():
    (svc,) = k8s("Service", "spurctld-client")
    spec = svc["spec"]
    assert not spec.get("publishNotReadyAddresses", False)
    assert spec.get("clusterIP") != "None"
    cfg = embedded_config()
    c = container()
    targets = {resolve_port(c, p.get("targetPort", p["port"])) for p in spec["ports"]}
    assert targets == {port_of(cfg["controller"]["listen"])}
    # Clients and agents are pointed at it.
    hosts = cfg["controller"]["hosts"]
    assert any(h.split(":")[0] == "spurctld-client" for h in hosts), hosts


def test_selectors_match_pod_labels():
    sts = statefulset()
    labels = sts["spec"]["template"]["metadata"]["labels"]
    match = sts["spec"]["selector"]["matchLabels"]
    assert match.items() <= labels.items()
    for svc in k8s("Service"):
        sel = svc["spec"]["selector"]
        assert sel and sel.items() <= labels.items(), svc["metadata"]["name"]
    for pdb in k8s("PodDisruptionBudget"):
        sel = pdb["spec"]["selector"]["matchLabels"]
        assert sel and sel.items() <= labels.items()
    c = container(sts)
    for svc in k8s("Service"):
        for p in svc["spec"]["ports"]:
            resolve_port(c, p.get("targetPort", p["port"]))


def test_statefulset_shape():
    sts = statefulset()
    spec = sts["spec"]
    pod = spec["template"]["spec"]
    cfg = embedded_config()
    assert spec["replicas"] == 3
    assert spec["podManagementPolicy"] == "Parallel"
    # Peers are the pods' stable names through the headless Service, one per replica,
    # on the container's raft port.
    c = container(sts)
    peers = cfg["controller"]["peers"]
    assert len(peers) == spec["replicas"]
    for i, peer in enumerate(peers):
        host, port = peer.rsplit(":", 1)
        assert host.split(".")[:2] == [f"{sts['metadata']['name']}-{i}", spec["serviceName"]]
        assert int(port) == resolve_port(c, "raft") == port_of(cfg["raft"]["listen"])
    # The state directory is a volume claim.
    claims = {t["metadata"]["name"] for t in spec["volumeClaimTemplates"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert mounts.get(cfg["controller"]["state_dir"]) in claims
    # Non-root.
    psc = pod.get("securityContext", {})
    csc = c.get("securityContext", {})
    assert psc.get("runAsNonRoot") or csc.get("runAsNonRoot")
    assert (csc.get("runAsUser") or psc.get("runAsUser")) not in (None, 0)
    assert csc.get("allowPrivilegeEscalation") is False
    # The config file the container reads is the one the ConfigMap provides.
    args = c.get("args", [])
    path = args[args.index("--config") + 1] if "--config" in args else args[args.index("-f") + 1]
    vol = mounts[os.path.dirname(path)]
    (v,) = [v for v in pod["volumes"] if v["name"] == vol]
    src = v.get("configMap") or v.get("secret")
    assert src, "the config volume is neither a ConfigMap nor a Secret"


def test_spurctld_is_the_entrypoint():
    sts = statefulset()
    pod = sts["spec"]["template"]["spec"]
    c = container(sts)
    # No command override: the image's ENTRYPOINT (spurctld) is PID 1.
    cmd = c.get("command")
    assert cmd is None or (len(cmd) == 1 and cmd[0].endswith("/spurctld")), cmd
    assert not pod.get("shareProcessNamespace"), "spurctld must be PID 1 of its pod"
    assert not pod.get("initContainers")
    text = (K8S / "Containerfile").read_text()
    entry = [ln for ln in text.splitlines() if ln.startswith("ENTRYPOINT")]
    assert len(entry) == 1, entry
    argv = json.loads(entry[0][len("ENTRYPOINT"):])
    assert argv == ["/usr/sbin/spurctld"], argv
    code = "\n".join(ln for ln in text.splitlines() if not ln.lstrip().startswith("#"))
    assert not re.search(r"\b(tini|dumb-init)\b", code), "no other init in the image"


def test_containerfile_builds_on_debian_12_as_non_root():
    text = (K8S / "Containerfile").read_text()
    # FROM ${BUILD_BASE} / ${RUNTIME_BASE}, whose defaults must be Debian 12 (a build
    # without a registry passes locally made bases: scripts/container-base.sh).
    args = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.M))
    froms = [ln.split()[1] for ln in text.splitlines() if ln.startswith("FROM ")]
    froms = [args.get(f[2:-1], f) if f.startswith("${") else f for f in froms]
    assert froms and all(re.match(r"debian:(12|bookworm)(-slim)?$", f) for f in froms), froms
    (user,) = [ln.split()[1] for ln in text.splitlines() if ln.startswith("USER ")]
    uid = int(user.split(":")[0])
    assert uid != 0
    pod = statefulset()["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == uid
    assert "meson install" in text and "--destdir" in text


def test_probes_use_the_health_port_and_served_routes():
    cfg = embedded_config()
    health = cfg["health"]
    assert health.get("enabled", True) is True
    assert health.get("bind", "all") not in ("loopback", "127.0.0.1", "::1"), \
        "the kubelet probes the pod IP: the health listener must not be loopback-only"
    c = container()
    ps = probes(c)
    assert set(ps) == {"startupProbe", "livenessProbe", "readinessProbe"}
    for kind, p in ps.items():
        get = p["httpGet"]
        assert get.get("scheme", "HTTP") == "HTTP"
        assert "host" not in get, f"{kind} must probe the pod IP"
        assert resolve_port(c, get["port"]) == health.get("port", 6823), kind
        assert get["path"] in RESPONDER_ROUTES, (kind, get["path"])
    assert ps["readinessProbe"]["httpGet"]["path"] == "/readyz"
    # /readyz fails while there is no leader: liveness and startup must not use it.
    assert ps["livenessProbe"]["httpGet"]["path"] in ("/healthz", "/livez")
    assert ps["startupProbe"]["httpGet"]["path"] in ("/healthz", "/livez")


def window_ms(p):
    return p.get("failureThreshold", 3) * p.get("periodSeconds", 10) * 1000


def test_liveness_never_restarts_a_replica_during_an_election():
    cfg = embedded_config()
    sup = cfg.get("supervisor", {})
    kill_ms = sup.get("kill_timeout_ms", 10000)
    election_ms = cfg.get("raft", {}).get("election_timeout_ms", 1000)
    ps = probes(container())
    live = ps["livenessProbe"]
    # spurctld's own stall handling (SIGABRT for a core, then exit 70) acts first...
    assert window_ms(live) > kill_ms + ABORT_TO_KILL_MS
    # ...and many elections fit in the window (/healthz ignores elections anyway).
    assert window_ms(live) >= 10 * election_ms
    assert live.get("failureThreshold", 3) >= 3
    # A long start (log replay) gets minutes before liveness starts counting.
    assert window_ms(ps["startupProbe"]) >= 5 * 60 * 1000
    ready = ps["readinessProbe"]
    assert window_ms(ready) <= 10 * 1000, "an unready replica should leave the Service fast"


def test_grace_period_exceeds_shutdown_grace():
    cfg = embedded_config()
    sup = cfg.get("supervisor", {})
    stop_ms = sup.get("shutdown_grace_ms", 10000) + sup.get("exit_linger_ms", 0)
    pod = statefulset()["spec"]["template"]["spec"]
    assert pod["terminationGracePeriodSeconds"] * 1000 > stop_ms + FINAL_REAP_MS


def test_no_probe_targets_the_metrics_port():
    cfg = embedded_config()
    metrics = cfg.get("metrics", {})
    assert metrics.get("bind", "loopback") == "loopback"
    mport = metrics.get("port", 6822)
    c = container()
    for kind, p in probes(c).items():
        assert resolve_port(c, p["httpGet"]["port"]) != mport, kind
    assert mport not in {p["containerPort"] for p in c["ports"]}
    for svc in k8s("Service"):
        for p in svc["spec"]["ports"]:
            assert resolve_port(c, p.get("targetPort", p["port"])) != mport


def test_pdb_allows_one_unavailable():
    (pdb,) = k8s("PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    assert "minAvailable" not in pdb["spec"]


def agent_daemonset():
    (ds,) = k8s("DaemonSet", "spurd")
    return ds


def agent_container(ds=None):
    return named_container(ds or agent_daemonset(), "spurd")


def test_agent_daemonset_runs_spurd_from_the_image_with_the_shared_config():
    ds = agent_daemonset()
    pod = ds["spec"]["template"]["spec"]
    c = agent_container(ds)
    labels = ds["spec"]["template"]["metadata"]["labels"]
    assert ds["spec"]["selector"]["matchLabels"].items() <= labels.items()
    # Neither the controller's Services nor its PDB select agent pods.
    for obj in k8s("Service") + k8s("PodDisruptionBudget"):
        sel = obj["spec"].get("selector", {})
        sel = sel.get("matchLabels", sel)
        assert not sel.items() <= labels.items(), obj["metadata"]["name"]
    # The controller's image, its other program.
    assert c["image"] == container()["image"]
    assert c["command"] == ["/usr/sbin/spurd"]
    args = c["args"]
    path = args[args.index("-f") + 1]
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    (v,) = [v for v in pod["volumes"] if v["name"] == mounts[os.path.dirname(path)]]
    ctl_maps = {x["configMap"]["name"]
                for x in statefulset()["spec"]["template"]["spec"]["volumes"] if "configMap" in x}
    assert v["configMap"]["name"] in ctl_maps, "the agents read the controller's spur.yaml"
    assert os.path.basename(path) == "spur.yaml"
    text = (K8S / "Containerfile").read_text()
    assert "6818" in [w for ln in text.splitlines() if ln.startswith("EXPOSE")
                      for w in ln.split()[1:]]


def test_agent_daemonset_network_privileges_and_spool():
    ds = agent_daemonset()
    pod = ds["spec"]["template"]["spec"]
    c = agent_container(ds)
    cfg = embedded_config()
    agent = cfg.get("agent", {})
    # The leader dials Node.address: the node's IP on the port spurd listens on.
    assert pod.get("hostNetwork") is True
    assert pod.get("dnsPolicy") == "ClusterFirstWithHostNet", "Service names must resolve"
    listen_port = port_of(agent.get("listen", "[::]:6818"))
    assert resolve_port(c, "agent") == listen_port
    args = c["args"]
    addr = args[args.index("--address") + 1]
    host, port = addr.rsplit(":", 1)
    assert int(port) == listen_port
    (env,) = [e for e in c["env"] if f"$({e['name']})" == host]
    assert env["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    # Jobs run as their users: root with the privileges setuid and cgroups take.
    sc = c["securityContext"]
    assert sc.get("runAsUser") == 0 and sc.get("privileged") is True
    # The spool is the host's, so reports survive the pod; the users are the host's.
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    spool = agent.get("spool_dir", "/var/spool/spur/d")
    assert vols[mounts[spool]]["hostPath"]["path"] == spool
    for f in ("/etc/passwd", "/etc/group"):
        assert vols[mounts[f]]["hostPath"]["path"] == f
    # No limits: spurd offers what its cgroup allows, a limit would shrink the node.
    assert not c.get("resources", {}).get("limits")
    # The leader marks a node down only after several missed heartbeats.
    assert agent.get("node_timeout_s", 60) >= 3 * agent.get("heartbeat_s", 10)


def test_embedded_config_passes_check_config(tmp_path):
    need_programs()
    f = tmp_path / "spur.yaml"
    f.write_text(embedded_config_text())
    # node_id 0: judged as the first pod would, since this host is none of the peers.
    r = check_config(f, "--hostname", "spurctld-0")
    assert r.returncode == 0, r.stderr
    eff = yaml.safe_load(r.stdout)
    assert len(eff["controller"]["peers"]) == 3


def test_probe_paths_are_served(tmp_path):
    """Run spurctld with the manifest's config (ports and paths made private) and ask it
    every path the probes use."""
    need_programs()
    ports = free_ports(4)
    client, raft, health, metrics = ports
    cfg = embedded_config()
    cfg["controller"].update(listen=f"127.0.0.1:{client}", state_dir=str(tmp_path / "state"),
                             peers=[f"127.0.0.1:{raft}"], hosts=[f"127.0.0.1:{client}"])
    cfg["raft"]["listen"] = f"127.0.0.1:{raft}"
    cfg["health"].update(bind="loopback", port=health)
    cfg["metrics"].update(port=metrics)
    # The manifest's key file and socket live in the pod's volumes: private ones here.
    cfg.setdefault("auth", {})["key_file"] = str(tmp_path / "spur.key")
    cfg["controller"]["socket"] = str(spurtest.short_dir() / "api.sock")
    f = tmp_path / "spur.yaml"
    f.write_text(yaml.safe_dump(cfg, sort_keys=False))
    with running([str(SPURCTLD), "-f", str(f)], tmp_path / "log", f"{tmp_path}/"):
        for kind, p in probes(container()).items():
            path = p["httpGet"]["path"]
            wait_until(lambda: try_get(health, path) == (200, "ok\n"),
                       what=f"{kind} {path} to answer 200 ok")
        assert try_get(health, "/no-such-path")[0] == 404


# ---- example configuration -------------------------------------------------------------


def test_example_config_is_valid_complete_and_default(tmp_path):
    need_programs()
    example = EXAMPLES / "spur.yaml"
    keys = accepted_keys(tmp_path)
    assert set(flatten(yaml.safe_load(example.read_text()))) == keys
    # Installed as the default config, it must change nothing.
    empty = tmp_path / "empty.yaml"
    a = check_config(example)
    b = check_config(empty)
    assert a.returncode == 0, a.stderr
    assert a.stdout.split("\n", 1)[1] == b.stdout.split("\n", 1)[1]


# ---- systemd ---------------------------------------------------------------------------


def unit_settings(text):
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;[":
            continue
        k, _, v = line.partition("=")
        out.setdefault(k.strip(), []).append(v.strip())
    return out


def seconds(span):
    total = 0.0
    for num, unit in re.findall(r"(\d+(?:\.\d+)?)\s*(ms|min|s|h)?", span):
        total += float(num) * {"ms": 0.001, "s": 1, "min": 60, "h": 3600, "": 1}[unit]
    return total


def test_unit_passes_systemd_analyze_verify(tmp_path):
    need_programs()
    tool = need_tool("systemd-analyze")
    unit = tmp_path / "spurctld.service"
    unit.write_text(UNIT_TEMPLATE.read_text().replace("@SBINDIR@", str(SPURCTLD.parent)))
    r = subprocess.run([tool, "verify", "--man=no", str(unit)], capture_output=True,
                       text=True, timeout=60)
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "spurctld.service" not in out, out


def test_unit_restart_and_watchdog_policy():
    s = unit_settings(UNIT_TEMPLATE.read_text())

    def one(key):
        assert len(s.get(key, [])) == 1, f"{key}= must be set once: {s.get(key)}"
        return s[key][0]

    assert one("Type") == "notify"
    assert one("NotifyAccess") == "main"
    assert one("Restart") == "on-failure"
    assert "70" in one("RestartForceExitStatus").split()
    prevent = set(one("RestartPreventExitStatus").split())
    assert {"65", "73", "78"} <= prevent and "70" not in prevent
    assert one("KillMode") == "mixed"
    assert one("ExecStart").split()[0] == "@SBINDIR@/spurctld"
    # The defaults the unit runs with (no -f: the installed spur.yaml, all defaults).
    cfg = yaml.safe_load((EXAMPLES / "spur.yaml").read_text())["supervisor"]
    assert seconds(one("WatchdogSec")) * 1000 > cfg["kill_timeout_ms"] + ABORT_TO_KILL_MS
    stop_ms = cfg["shutdown_grace_ms"] + cfg.get("exit_linger_ms", 0)
    assert seconds(one("TimeoutStopSec")) * 1000 > stop_ms + FINAL_REAP_MS


# ---- LSB init script -------------------------------------------------------------------


def test_init_script_is_shellcheck_clean():
    tool = need_tool("shellcheck")
    r = subprocess.run([tool, "-s", "sh", str(INIT_SCRIPT)], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


class InitScript:
    """The init script pointed at the build tree and a temporary directory."""

    def __init__(self, tmp_path):
        self.dir = tmp_path
        self.marker = f"{tmp_path}/"
        self.ports = free_ports(4)
        self.health = self.ports[2]
        self.config = tmp_path / "spur.yaml"
        self.rundir = tmp_path / "run"
        self.log = tmp_path / "log" / "spurctld.log"
        self.state = tmp_path / "state"
        self.write_config()
        defaults = tmp_path / "defaults"
        defaults.write_text(
            f"SPURCTLD={SPURCTLD}\n"
            f"SPURCTLD_CONFIG={self.config}\n"
            "SPURCTLD_USER=\n"
            f"SPURCTLD_RUNDIR={self.rundir}\n"
            f"SPURCTLD_LOG={self.log}\n"
            "SPURCTLD_SYSLOG=no\n"
            "SPURCTLD_BACKOFF_MIN=1\n"
            "SPURCTLD_STOP_TIMEOUT=20\n")
        self.env = dict(os.environ, SPURCTLD_DEFAULTS=str(defaults))

    def write_config(self, broken=False):
        text = private_config(self.dir, self.ports)
        if broken:
            text += "no_such_section:\n  key: 1\n"
        self.config.write_text(text)

    def run(self, action):
        r = subprocess.run(["/bin/sh", str(INIT_SCRIPT), action], env=self.env,
                           capture_output=True, text=True, timeout=60)
        return r.returncode, r.stdout + r.stderr

    def spurctld_pid(self):
        try:
            return int((self.rundir / "spurctld.pid").read_text())
        except (OSError, ValueError):
            return None

    def worker_pid(self):
        try:
            return int((self.state / "LOCK").read_text())
        except (OSError, ValueError):
            return None

    def log_text(self):
        try:
            return self.log.read_text()
        except OSError:
            return ""

    def ready(self):
        r = try_get(self.health, "/readyz")
        return r == (200, "ok\n")


@pytest.fixture
def init_script(tmp_path):
    need_programs()
    if not os.access(INIT_SCRIPT, os.R_OK):
        pytest.skip("no init script")
    s = InitScript(tmp_path)
    try:
        yield s
    finally:
        s.run("stop")
        kill_marked(s.marker)


def test_init_script_restarts_after_70_not_after_78_and_stops_clean(init_script):
    s = init_script
    rc, out = s.run("status")
    assert rc == 3, out

    rc, out = s.run("start")
    assert rc == 0, out + s.log_text()
    rc, out = s.run("status")
    assert rc == 0 and "running" in out, out
    wait_until(s.ready, what="/readyz ok after start")
    first = s.spurctld_pid()

    # The worker dies: spurctld exits 70 and the keeper starts it again.
    os.kill(s.worker_pid(), signal.SIGKILL)
    wait_until(lambda: s.spurctld_pid() not in (None, first) and s.ready(),
               what="a new spurctld after exit 70")
    assert re.search(r'level=warn .*msg="spurctld exited 70; restarting"', s.log_text())
    rc, out = s.run("status")
    assert rc == 0 and "running" in out, out

    # A broken configuration: the next start exits 78 and is not retried.
    s.write_config(broken=True)
    os.kill(s.worker_pid(), signal.SIGKILL)
    wait_until(lambda: "exited 78; not restarting" in s.log_text(),
               what="the keeper to give up after exit 78")
    assert re.search(r'level=error .*msg="spurctld exited 78; not restarting.*exit=78',
                     s.log_text())
    wait_until(lambda: s.run("status")[0] == 1, what="status to report the failure")
    assert "78" in s.run("status")[1]
    assert s.log_text().count('msg="spurctld started"') == 3
    assert s.spurctld_pid() is None
    assert not processes_marked(s.marker), "the keeper and spurctld should be gone"

    # start refuses a broken configuration, says why, and logs the decision.
    rc, out = s.run("start")
    assert rc == 6, out
    assert "no_such_section" in out
    assert 'msg="not starting: invalid configuration"' in s.log_text()
    assert not processes_marked(s.marker)

    # Fixed: start, stop, and nothing is left.
    s.write_config()
    rc, out = s.run("start")
    assert rc == 0, out + s.log_text()
    wait_until(s.ready, what="/readyz ok after the second start")
    rc, out = s.run("stop")
    assert rc == 0, out
    assert not processes_marked(s.marker), "processes left after stop"
    rc, out = s.run("status")
    assert rc == 3, out
    assert not (s.rundir / "spurctld.pid").exists()
    assert not (s.rundir / "spurctld-keeper.pid").exists()
    assert 'msg="spurctld stopped on request; keeper exiting" exit=0' in s.log_text()


def test_init_script_reload_sends_sighup_and_restart_keeps_a_running_replica(init_script):
    s = init_script
    rc, out = s.run("start")
    assert rc == 0, out + s.log_text()
    wait_until(s.ready, what="/readyz ok")
    pid = s.spurctld_pid()
    rc, out = s.run("reload")
    assert rc == 0, out
    wait_until(lambda: "signal forwarded to the worker" in s.log_text(), what="SIGHUP")
    assert s.spurctld_pid() == pid
    # restart with a broken config refuses and leaves the replica running.
    s.write_config(broken=True)
    rc, out = s.run("restart")
    assert rc == 6, out
    assert s.spurctld_pid() == pid and s.ready()
    s.write_config()
    rc, out = s.run("restart")
    assert rc == 0, out
    wait_until(lambda: s.spurctld_pid() not in (None, pid) and s.ready(), what="restart")


# ---- man pages -------------------------------------------------------------------------


def man_sections(page):
    return [ln[4:].strip() for ln in page.read_text().splitlines() if ln.startswith(".Sh ")]


@pytest.mark.parametrize("page", MAN_PAGES, ids=lambda p: p.name)
def test_man_page_lints_clean(page):
    if shutil.which("mandoc"):
        r = subprocess.run(["mandoc", "-T", "lint", "-W", "warning", str(page)],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
        # Style too, except links to pages the host has not installed.
        r = subprocess.run(["mandoc", "-T", "lint", str(page)], capture_output=True,
                           text=True, timeout=60)
        msgs = [ln for ln in (r.stdout + r.stderr).splitlines()
                if "referenced manual not found" not in ln and "mandoc.db" not in ln]
        assert not msgs, "\n".join(msgs)
    elif shutil.which("groff"):
        r = subprocess.run(["groff", "-mandoc", "-ww", "-z", str(page)], capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0 and not r.stderr.strip(), r.stderr
    else:
        pytest.skip("neither mandoc nor groff is installed")


def test_man_pages_have_the_sections_that_apply():
    want = {
        "spurctld.8": ["SIGNALS", "ENVIRONMENT", "FILES", "EXIT STATUS", "EXAMPLES"],
        "spurctld-raftd.8": ["SIGNALS", "ENVIRONMENT", "FILES", "EXIT STATUS", "EXAMPLES"],
        "spur.yaml.5": ["ENVIRONMENT", "FILES", "EXAMPLES"],
    }
    assert {p.name for p in MAN_PAGES} >= set(want)
    for name, sections in want.items():
        have = man_sections(MAN / name)
        for sec in ["NAME", "SYNOPSIS", "DESCRIPTION", *sections, "SEE ALSO"]:
            assert sec in have, f"{name}: no {sec} section"
    text = (MAN / "spurctld.8").read_text()
    status = text.split(".Sh EXIT STATUS", 1)[1].split(".Sh ", 1)[0]
    for code in (0, 64, 65, 70, 71, 73, 78):
        assert re.search(rf"^\.It {code}$", status, re.M), f"spurctld(8): exit {code}"


@pytest.mark.parametrize("prog,page", [(SPURCTLD, "spurctld.8"), (RAFTD, "spurctld-raftd.8")],
                         ids=["spurctld", "spurctld-raftd"])
def test_man_page_documents_every_option(prog, page):
    need_programs()
    help_text = subprocess.run([str(prog), "--help"], capture_output=True, text=True,
                               timeout=30).stdout
    text = (MAN / page).read_text().replace("\\-", "-")
    for opt in set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*|-[a-zA-Z])\b", help_text)):
        assert f"Fl {opt[1:]}" in text, f"{page}: {opt} is not documented"


MAN_KEY = re.compile(r"^\.It Cm (\S+)(?: (.*))?$")


def man_keys():
    """{dotted key: (default spec, entry text)} from spur.yaml(5)."""
    keys = {}
    cur = None
    for line in (MAN / "spur.yaml.5").read_text().splitlines():
        m = MAN_KEY.match(line)
        if m:
            cur = m.group(1).replace("[]", "")
            assert cur not in keys, f"{cur} is documented twice"
            keys[cur] = [m.group(2) or "", ""]
        elif cur and (line.startswith(".It") or line.startswith(".El")):
            cur = None
        elif cur:
            keys[cur][1] += line + "\n"
    return keys


def test_spur_yaml_5_documents_exactly_the_accepted_keys(tmp_path):
    need_programs()
    accepted = accepted_keys(tmp_path)
    documented = set(man_keys())
    assert not accepted - documented, f"undocumented keys: {sorted(accepted - documented)}"
    assert not documented - accepted, f"documented, not accepted: {sorted(documented - accepted)}"
    for key, (_, body) in man_keys().items():
        assert "restart" in body.lower(), f"spur.yaml(5) {key}: say whether a restart is needed"


def render_default(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(map(str, v)) + "]"
    if v == "":
        return None
    return str(v)


def test_spur_yaml_5_defaults_match_the_loader(tmp_path):
    need_programs()
    f = tmp_path / "one-partition.yaml"
    # The second partition shows the per-key defaults (the first is the default one).
    f.write_text("partitions:\n  - {name: first, default: true}\n  - {name: probe}\n")
    eff = flatten(effective(f))
    for key, (spec, _) in man_keys().items():
        if spec == "Pq required":
            assert key == "partitions.name", key
            continue
        if spec == "Pq default empty":
            assert eff[key] == "", key
            continue
        m = re.fullmatch(r"Pq default Ql (.+)", spec)
        assert m, f"{key}: the .It line should end in 'Pq default Ql VALUE': {spec!r}"
        assert m.group(1) == render_default(eff[key]), (key, m.group(1), eff[key])


def test_spur_yaml_5_examples_are_valid(tmp_path):
    need_programs()
    text = (MAN / "spur.yaml.5").read_text()
    blocks = re.findall(r"^\.Bd -literal[^\n]*\n(.*?)^\.Ed$", text, re.M | re.S)
    yaml_blocks = [b for b in blocks if not b.lstrip().startswith("$")]
    assert len(yaml_blocks) >= 2
    for i, b in enumerate(yaml_blocks):
        f = tmp_path / f"example{i}.yaml"
        f.write_text(b.replace("\\-", "-").replace("\\e", "\\"))
        r = check_config(f, "--hostname", "ctl1")  # the host of the first example
        assert r.returncode == 0, (b, r.stderr)


# ---- meson install ---------------------------------------------------------------------


def build_options():
    f = BUILD / "meson-info" / "intro-buildoptions.json"
    if not f.exists():
        pytest.skip(f"{BUILD} is not a meson build directory")
    opts = {o["name"]: o["value"] for o in json.loads(f.read_text())}
    prefix = Path(opts["prefix"])
    return {k: prefix / opts[k] for k in ("sbindir", "libexecdir", "sysconfdir", "mandir")} | {
        "prefix": prefix}


def under(destdir, path):
    return destdir / str(path).lstrip("/")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    need_programs()
    meson = need_tool("meson")
    d = tmp_path_factory.mktemp("destdir")
    r = subprocess.run([meson, "install", "-C", str(BUILD), "--destdir", str(d), "--quiet"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return d, build_options()


def test_meson_install_destdir(installed, tmp_path):
    d, o = installed
    sbin = under(d, o["sbindir"] / "spurctld")
    worker = under(d, o["libexecdir"] / "spurctld-raftd")
    conf = under(d, o["sysconfdir"] / "spur" / "spur.yaml")
    unit = under(d, o["prefix"] / "lib" / "systemd" / "system" / "spurctld.service")
    for f in (sbin, worker, conf, unit):
        assert f.is_file(), f"{f} not installed (reconfigure {BUILD} if it predates the file)"
    assert os.access(sbin, os.X_OK) and os.access(worker, os.X_OK)
    for page in MAN_PAGES:
        section = page.suffix[1:]
        assert under(d, o["mandir"] / f"man{section}" / page.name).is_file(), page.name
    assert f"ExecStart={o['sbindir']}/spurctld" in unit.read_text().splitlines()
    # The installed programs run from there.
    r = subprocess.run([str(sbin), "--version"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and r.stdout.startswith("spurctld "), r
    r = subprocess.run([str(sbin), "--check-config", "-f", str(conf)], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    # The installed pair serves: spurctld with the installed worker.
    ports = free_ports(4)
    cfg = tmp_path / "spur.yaml"
    cfg.write_text(private_config(tmp_path, ports))
    log = tmp_path / "log"
    with running([str(sbin), "-f", str(cfg), "--worker", str(worker)], log,
                 f"{tmp_path}/") as p:
        wait_until(lambda: try_get(ports[2], "/readyz") == (200, "ok\n"), what="/readyz")
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=WAIT) == 0, log.read_text()


def test_installed_spurctld_finds_its_worker_without_flag(installed, tmp_path):
    """Without --worker an installed spurctld runs the worker from ../libexec next to its
    own directory, so a DESTDIR staging tree or a relocated install works as it is."""
    d, o = installed
    ports = free_ports(4)
    cfg = tmp_path / "spur.yaml"
    cfg.write_text(private_config(tmp_path, ports))
    log = tmp_path / "log"
    sbin = under(d, o["sbindir"] / "spurctld")
    with running([str(sbin), "-f", str(cfg)], log, f"{tmp_path}/") as p:
        wait_until(lambda: try_get(ports[2], "/readyz") == (200, "ok\n"), what="/readyz")
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=WAIT) == 0, log.read_text()
    m = re.search(r'msg="worker started" pid=\d+ path="?([^"\s]+)"?', log.read_text())
    assert m, log.read_text()
    used = os.path.realpath(m.group(1))
    assert used == os.path.realpath(under(d, o["libexecdir"] / "spurctld-raftd")), used


def test_local_cluster_example_forms_a_cluster(tmp_path):
    """examples/local-cluster: three valid configs that really form a cluster."""
    import yaml
    paths = sorted((REPO / "examples" / "local-cluster").glob("n*.yaml"))
    assert len(paths) == 3
    procs = []
    try:
        ports = free_ports(12)
        cfgs = []
        for k, p in enumerate(paths):
            cfg = yaml.safe_load(p.read_text())
            r = subprocess.run([str(SPURCTLD), "--check-config", "-f", str(p)],
                               capture_output=True, text=True, timeout=WAIT)
            assert r.returncode == 0, r.stderr
            cfgs.append(cfg)
        # Same shape on private ports and state dirs, so the test cannot collide with a
        # real local cluster.
        raft = [f"127.0.0.1:{ports[4 * k]}" for k in range(3)]
        api = [f"127.0.0.1:{ports[4 * k + 1]}" for k in range(3)]
        # Step 0 of the README: one cluster key for all three, made by spurctld keygen.
        key = tmp_path / "spur.key"
        r = subprocess.run([str(SPURCTLD), "keygen", str(key)], capture_output=True, text=True,
                           timeout=WAIT)
        assert r.returncode == 0, r.stderr
        sockdir = spurtest.short_dir()
        for k, cfg in enumerate(cfgs):
            cfg["controller"].update(listen=api[k], peers=raft, hosts=api,
                                     state_dir=str(tmp_path / f"n{k + 1}"),
                                     socket=str(sockdir / f"n{k + 1}.sock"))
            cfg["auth"]["key_file"] = str(key)
            cfg["raft"]["listen"] = raft[k]
            cfg["health"]["port"] = ports[4 * k + 2]
            cfg["metrics"]["port"] = ports[4 * k + 3]
            path = tmp_path / f"n{k + 1}.yaml"
            path.write_text(yaml.safe_dump(cfg))
            log = open(tmp_path / f"n{k + 1}.log", "wb")
            procs.append(subprocess.Popen([str(SPURCTLD), "-f", str(path)], stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True))
        for k in range(3):
            wait_until(lambda k=k: try_get(ports[4 * k + 2], "/readyz") == (200, "ok\n"),
                       what=f"replica {k + 1} ready")
        # No SPUR_CONTROLLER: the CLI uses n1's local socket, as the README's commands do.
        env = dict(os.environ, SPUR_CONFIG=str(tmp_path / "n1.yaml"))
        env.pop("SPUR_CONTROLLER", None)
        env.pop("SPUR_JWT", None)
        r = subprocess.run([str(BUILD / "client" / "sinfo"), "-h", "-o", "%P"],
                           capture_output=True, text=True, env=env, timeout=WAIT)
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == ["debug*", "batch"], r.stdout
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(10)
