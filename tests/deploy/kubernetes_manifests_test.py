#!/usr/bin/env python3
"""Offline checks of deploy/kubernetes/ (docs/kubernetes.md "What was checked").

No Kubernetes cluster is used. The test parses every manifest and checks the fields the
deployment depends on: the secrets and where they are mounted, Redis's volume claim, the
head's Service, --advertise-address fed from status.podIP, the TPU slice template's node
selectors, google.com/tpu requests, headless Service and TPU_* environment, the
autoscaler's ConfigMap (parsed, its groups named, its commands run against a stand-in
kubectl that records what it was asked) and the RBAC that lets it scale StatefulSets.
Then, when kubectl is installed, `kubectl label --local` parses every object as kubectl
would (no server is contacted: client-side `apply --dry-run=client` still asks the API
server for its resource list). Without kubectl it exits 77 (skipped) once the other
checks passed, or fails under CI=true (CI installs kubernetes-client).

Usage: kubernetes_manifests_test.py <repository root>
Environment: ORRERY_KUBECTL (default: kubectl on PATH).
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

SKIP = 77
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}", file=sys.stderr)
    return cond


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def find(objs, kind, name):
    hits = [o for o in objs if o["kind"] == kind and o["metadata"]["name"] == name]
    check(len(hits) == 1, f"exactly one {kind}/{name} (found {len(hits)})")
    return hits[0] if hits else None


def containers(workload):
    return workload["spec"]["template"]["spec"]["containers"]


def env_of(container):
    return {e["name"]: e for e in container.get("env", [])}


def field_ref(container, name):
    e = env_of(container).get(name, {})
    return e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")


def command_text(container):
    return " ".join(container.get("command", []) + container.get("args", []))


def mounted_secret_paths(workload, container):
    """{mount path: secret name} of the secret (and projected secret) volumes mounted."""
    volumes = {v["name"]: v for v in workload["spec"]["template"]["spec"].get("volumes", [])}
    out = {}
    for m in container.get("volumeMounts", []):
        v = volumes.get(m["name"], {})
        if "secret" in v:
            for key in ("token", "password"):
                out[os.path.join(m["mountPath"], key)] = v["secret"]["secretName"]
        for src in v.get("projected", {}).get("sources", []):
            if "secret" in src:
                for item in src["secret"].get("items", []):
                    out[os.path.join(m["mountPath"], item["path"])] = src["secret"]["name"]
    return out


def check_var_refs(workload):
    """$(VAR) in args, command and env values must name an env var defined before it
    (Kubernetes leaves an unknown reference as literal text)."""
    for c in containers(workload):
        defined = []
        for e in c.get("env", []):
            for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", e.get("value", "")):
                check(ref in defined, f"{workload['metadata']['name']}/{c['name']}: env "
                      f"{e['name']} refers to $({ref}) before it is defined")
            defined.append(e["name"])
        for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", command_text(c)):
            check(ref in defined, f"{workload['metadata']['name']}/{c['name']}: $({ref}) in "
                  "its command is not an env var of the container")


def check_advertises_pod_ip(workload, c):
    name = f"{workload['metadata']['name']}/{c['name']}"
    text = command_text(c)
    check(re.search(r"--bind[= ]0\.0\.0\.0", text), f"{name} binds 0.0.0.0")
    check(re.search(r'--advertise-address[= ]"?(\$\(POD_IP\)|\$POD_IP)"?', text),
          f"{name} advertises $POD_IP")
    check(field_ref(c, "POD_IP") == "status.podIP", f"{name}: POD_IP from status.podIP")


def check_token(workload, c, secrets):
    name = f"{workload['metadata']['name']}/{c['name']}"
    m = re.search(r"--token-file[= ](\S+)", command_text(c))
    path = m.group(1) if m else env_of(c).get("ORRERY_TOKEN_FILE", {}).get("value")
    mounts = mounted_secret_paths(workload, c)
    if check(path, f"{name} is given the cluster token (--token-file or ORRERY_TOKEN_FILE)"):
        check(mounts.get(path) == "orrery-token",
              f"{name}: the token {path} is the orrery-token Secret mounted ({mounts})")
    for secret in mounts.values():
        check(secret in secrets, f"{name} mounts the Secret {secret}, which is defined")


def check_secrets(objs):
    token = find(objs, "Secret", "orrery-token")
    password = find(objs, "Secret", "orrery-redis-password")
    if token:
        t = token.get("stringData", {}).get("token", "")
        # A placeholder Orrery refuses (a token has no spaces), never a usable default.
        check(" " in t, "the orrery-token placeholder is not a usable token")
    if password:
        p = password.get("stringData", {}).get("password", "")
        check(not re.fullmatch(r"[A-Za-z0-9]+", p),
              "the Redis password placeholder is refused by the Redis container")
    return {"orrery-token", "orrery-redis-password"}


def check_redis(objs):
    sts = find(objs, "StatefulSet", "orrery-redis")
    svc = find(objs, "Service", "orrery-redis")
    if not sts:
        return
    claims = sts["spec"].get("volumeClaimTemplates", [])
    check(claims and claims[0]["spec"]["resources"]["requests"].get("storage"),
          "Redis has a PersistentVolumeClaim template with a storage request")
    c = containers(sts)[0]
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    check(claims and mounts.get(claims[0]["metadata"]["name"]) == "/data",
          "Redis's claim is mounted at /data")
    text = command_text(c)
    check("--appendonly yes" in text and "--dir /data" in text,
          "redis-server runs with --appendonly yes in /data")
    check("requirepass" in text and "/etc/orrery/redis/password" in text,
          "redis-server's requirepass comes from the mounted password file")
    check("--requirepass" not in text, "the password is not on redis-server's command line")
    check(mounted_secret_paths(sts, c).get("/etc/orrery/redis/password") ==
          "orrery-redis-password", "Redis mounts the orrery-redis-password Secret")
    if svc:
        check([p["port"] for p in svc["spec"]["ports"]] == [6379], "orrery-redis serves 6379")


def check_head(objs, secrets):
    dep = find(objs, "Deployment", "orrery-head")
    svc = find(objs, "Service", "orrery-head")
    if not dep or not svc:
        return
    check(dep["spec"]["replicas"] == 1, "one head")
    by_name = {c["name"]: c for c in containers(dep)}
    head = by_name.get("head")
    if check(head, "the head pod has a head container"):
        text = command_text(head)
        check(text.startswith("orrery head"), "the head container runs `orrery head`")
        check_advertises_pod_ip(dep, head)
        check("--redis-address=orrery-redis:6379" in text, "the head uses orrery-redis:6379")
        check(mounted_secret_paths(dep, head).get("/etc/orrery/redis/password") ==
              "orrery-redis-password" and "--redis-password-file=/etc/orrery/redis/password"
              in text, "the head reads the Redis password from the mounted Secret")
        check_token(dep, head, secrets)
    dash = by_name.get("dashboard")
    if check(dash, "the head pod runs the dashboard"):
        check_token(dep, dash, secrets)
    ports = {p["name"]: p for c in containers(dep) for p in c.get("ports", [])}
    want = {"head": 6380, "dashboard": 8265, "metrics": 8080}
    got = {p["name"]: p["port"] for p in svc["spec"]["ports"]}
    check(got == want, f"orrery-head's ports {got} are {want}")
    for p in svc["spec"]["ports"]:
        target = ports.get(p["targetPort"])
        check(target and target["containerPort"] == p["port"],
              f"orrery-head's port {p['name']} reaches a container port")
    sel = svc["spec"]["selector"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    check(all(labels.get(k) == v for k, v in sel.items()), "orrery-head selects the head pod")


def check_node(sts, group, secrets):
    name = sts["metadata"]["name"]
    c = containers(sts)[0]
    text = command_text(c)
    check(re.search(r"orrery node --address[= ]orrery-head:6380", text),
          f"{name} runs `orrery node --address orrery-head:6380`")
    check_advertises_pod_ip(sts, c)
    check(field_ref(c, "POD_NAME") == "metadata.name", f"{name}: POD_NAME from metadata.name")
    m = re.search(r'--labels[= ]"?([^" ]+)', text)
    labels = dict(kv.split("=", 1) for kv in m.group(1).split(",")) if m else {}
    check(labels.get("orrery.io/autoscaler-group") == group,
          f"{name} labels its node orrery.io/autoscaler-group={group}")
    check(labels.get("orrery.io/autoscaler-node") in ("$(POD_NAME)", "$POD_NAME"),
          f"{name} labels its node orrery.io/autoscaler-node=<pod name>")
    check_token(sts, c, secrets)
    check_var_refs(sts)
    svc_name = sts["spec"]["serviceName"]
    return c, svc_name


def check_cpu_workers(objs, secrets):
    sts = find(objs, "StatefulSet", "orrery-cpu-worker")
    if not sts:
        return None
    _, svc_name = check_node(sts, "cpu", secrets)
    svc = find(objs, "Service", svc_name)
    check(svc and svc["spec"].get("clusterIP") == "None", "the CPU workers' Service is headless")
    return sts


def check_tpu_slice(path, secrets):
    objs = load(path)
    for o in objs:
        check("namespace" not in o["metadata"],
              f"the slice template's {o['kind']} takes the namespace it is applied in")
        check(o["metadata"]["name"] == "__SLICE__", f"the slice's {o['kind']} is named __SLICE__")
        check(o["metadata"].get("labels", {}).get("orrery.io/tpu-slice") == "__SLICE__",
              f"the slice's {o['kind']} has the label orrery.io/tpu-slice=__SLICE__ (delete -l)")
    sts = find(objs, "StatefulSet", "__SLICE__")
    svc = find(objs, "Service", "__SLICE__")
    if not sts or not svc:
        return None
    spec = sts["spec"]["template"]["spec"]
    sel = spec.get("nodeSelector", {})
    check(sel.get("cloud.google.com/gke-tpu-accelerator") == "tpu-v4-podslice",
          "node selector cloud.google.com/gke-tpu-accelerator: tpu-v4-podslice")
    topology = sel.get("cloud.google.com/gke-tpu-topology")
    check(topology == "2x2x2", "node selector cloud.google.com/gke-tpu-topology: 2x2x2")
    c, svc_name = check_node(sts, "tpu-v4-16", secrets)
    res = c.get("resources", {})
    chips = res.get("requests", {}).get("google.com/tpu")
    check(chips == 4 and res.get("limits", {}).get("google.com/tpu") == 4,
          "google.com/tpu: 4 requested and limited")
    hosts = sts["spec"]["replicas"]
    total = 1
    for d in (topology or "0").split("x"):
        total *= int(d)
    check(hosts * (chips or 0) == total,
          f"{hosts} hosts x {chips} chips make the topology's {total} chips")
    check(sts["spec"].get("podManagementPolicy") == "Parallel", "a slice's hosts start together")
    check(svc_name == "__SLICE__" and svc["spec"].get("clusterIP") == "None",
          "the slice's Service is headless and is the StatefulSet's serviceName")
    check(svc["spec"].get("publishNotReadyAddresses") is True,
          "the slice's hosts resolve each other before they are ready")
    pod_labels = sts["spec"]["template"]["metadata"]["labels"]
    check(all(pod_labels.get(k) == v for k, v in svc["spec"]["selector"].items()),
          "the slice's Service selects its pods")
    env = env_of(c)
    check(env.get("TPU_NAME", {}).get("value") == "__SLICE__", "TPU_NAME is the slice name")
    text = command_text(c)
    check(re.search(r"TPU_WORKER_ID=\$\{POD_NAME##\*-\}", text) and
          "export TPU_WORKER_ID" in text, "TPU_WORKER_ID is the pod's ordinal, exported")
    want_hosts = ",".join(f"__SLICE__-{i}.__SLICE__.$(POD_NAMESPACE).svc" for i in range(hosts))
    check(env.get("TPU_WORKER_HOSTNAMES", {}).get("value") == want_hosts,
          f"TPU_WORKER_HOSTNAMES lists the {hosts} pods' DNS names in ordinal order")
    check(field_ref(c, "POD_NAMESPACE") == "metadata.namespace", "POD_NAMESPACE from the pod")
    check(env.get("TPU_ACCELERATOR_TYPE", {}).get("value") == "v4-16" and
          env.get("TPU_TOPOLOGY", {}).get("value") == topology,
          "TPU_ACCELERATOR_TYPE and TPU_TOPOLOGY match the node selectors")
    # The ordinal derivation, run: what `sh` makes of two pod names.
    for pod, want in (("tpu-v4-16-0-1", "1"), ("slice-a-0", "0")):
        out = subprocess.run(["sh", "-c", 'POD_NAME=$1; echo "${POD_NAME##*-}"', "sh", pod],
                             capture_output=True, text=True).stdout.strip()
        check(out == want, f"the pod {pod} gets TPU_WORKER_ID {want} (got {out})")
    return {"hosts": hosts, "topology": topology, "cpu": c}


def role_allows(role, group, resource, verb):
    return any(group in r.get("apiGroups", []) and resource in r.get("resources", []) and
               verb in r.get("verbs", []) for r in role["rules"])


def run_provider(command, env, stdin_check=None):
    """Runs `command` with sh -c and a stand-in kubectl that records its arguments (one per
    line) and its standard input; returns (exit code, [argv...], stdin text)."""
    with tempfile.TemporaryDirectory() as d:
        fake = os.path.join(d, "kubectl")
        with open(fake, "w") as f:
            f.write('#!/bin/sh\nprintf "%s\\n" "$@" > "$FAKE_DIR/argv"\n'
                    'if [ ! -t 0 ]; then cat > "$FAKE_DIR/stdin"; fi\n')
        os.chmod(fake, 0o755)
        full = dict(os.environ, PATH=d + ":" + os.environ["PATH"], FAKE_DIR=d, **env)
        r = subprocess.run(["sh", "-c", command], env=full, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True)
        argv = open(os.path.join(d, "argv")).read().split("\n")[:-1] \
            if os.path.exists(os.path.join(d, "argv")) else None
        stdin = open(os.path.join(d, "stdin")).read() \
            if os.path.exists(os.path.join(d, "stdin")) else ""
        return r.returncode, argv, stdin, r.stderr


def check_autoscaler(objs, root, slice_facts, cpu_sts):
    cm = find(objs, "ConfigMap", "orrery-autoscaler")
    dep = find(objs, "Deployment", "orrery-autoscaler")
    role = find(objs, "Role", "orrery-autoscaler")
    binding = find(objs, "RoleBinding", "orrery-autoscaler")
    find(objs, "ServiceAccount", "orrery-autoscaler")
    if not (cm and dep and role and binding):
        return
    for verb in ("get", "patch"):
        check(role_allows(role, "apps", "statefulsets", verb), f"RBAC: {verb} statefulsets")
        check(role_allows(role, "apps", "statefulsets/scale", verb),
              f"RBAC: {verb} statefulsets/scale")
    for res in ("statefulsets", "services"):
        group = "apps" if res == "statefulsets" else ""
        for verb in ("create", "delete", "list", "patch", "get"):
            check(role_allows(role, group, res, verb), f"RBAC: {verb} {res} (a slice)")
    check(binding["roleRef"]["name"] == "orrery-autoscaler" and
          binding["subjects"][0]["name"] == "orrery-autoscaler",
          "the RoleBinding gives the Role to the autoscaler's ServiceAccount")
    spec = dep["spec"]["template"]["spec"]
    check(spec.get("serviceAccountName") == "orrery-autoscaler",
          "the autoscaler runs as its ServiceAccount")
    c = spec["containers"][0]
    check(command_text(c) == "orrery autoscaler --config /etc/orrery/autoscaler.yaml",
          "the autoscaler runs `orrery autoscaler --config /etc/orrery/autoscaler.yaml`")
    check(field_ref(c, "POD_NAMESPACE") == "metadata.namespace",
          "the autoscaler knows its namespace (POD_NAMESPACE)")
    check_token(dep, c, {"orrery-token", "orrery-redis-password"})
    check_var_refs(dep)
    projected = [s["configMap"] for v in spec["volumes"]
                 for s in v.get("projected", {}).get("sources", []) if "configMap" in s]
    paths = {i["path"] for p in projected for i in p.get("items", [])}
    check({"autoscaler.yaml", "tpu-slice.yaml"} <= paths and
          any(m["mountPath"] == "/etc/orrery" for m in c["volumeMounts"]),
          "the ConfigMap's autoscaler.yaml and tpu-slice.yaml are at /etc/orrery")

    with open(os.path.join(root, "deploy/kubernetes/tpu/tpu-slice.yaml")) as f:
        check(cm["data"].get("tpu-slice.yaml") == f.read(),
              "the ConfigMap's tpu-slice.yaml is deploy/kubernetes/tpu/tpu-slice.yaml")
    config = yaml.safe_load(cm["data"]["autoscaler.yaml"])
    cli = os.environ.get("ORRERY_CLI")
    if cli:  # the autoscaler's own parser takes it (strict: unknown fields are errors)
        with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
            f.write(cm["data"]["autoscaler.yaml"])
            f.flush()
            r = subprocess.run([cli, "autoscaler", "--check", "--config", f.name],
                               capture_output=True, text=True, timeout=60)
        check(r.returncode == 0 and "group cpu:" in r.stdout and "group tpu-v4-16:" in r.stdout
              and "slices of 2 v4-16 hosts" in r.stdout,
              f"orrery autoscaler --check takes the ConfigMap's config ({r.returncode}: "
              f"{r.stdout}{r.stderr})")
    check(set(config) <= {"interval_s", "provider", "groups"},
          f"autoscaler.yaml has only known keys ({sorted(config)})")
    group_keys = {"name", "resources", "labels", "min", "max", "idle_timeout_s", "tpu",
                  "provider"}
    groups = {g["name"]: g for g in config.get("groups", [])}
    check(set(groups) == {"cpu", "tpu-v4-16"}, f"the groups are cpu and tpu-v4-16 ({groups})")
    for g in groups.values():
        check(set(g) <= group_keys, f"group {g['name']} has only known keys ({sorted(g)})")
        check(0 <= g["min"] <= g["max"], f"group {g['name']}: 0 <= min <= max")
    default = config.get("provider", {})
    check(default.get("type") == "command", "the default provider is `command`")
    cpu = groups.get("cpu", {})
    if cpu_sts:
        limit = containers(cpu_sts)[0]["resources"]["limits"]["cpu"]
        check(cpu.get("resources", {}).get("CPU") == int(limit),
              f"the cpu group's node shape (CPU {cpu.get('resources')}) is a worker pod's {limit}")
        check(cpu_sts["spec"]["replicas"] == cpu.get("min"),
              "the CPU StatefulSet starts at the group's min")
    env = {"POD_NAMESPACE": "orrery", "ORRERY_GROUP": "cpu", "ORRERY_GROUP_SIZE": "3",
           "ORRERY_NODE_NAME": "orrery-cpu-worker-2", "ORRERY_HEAD_ADDRESS": "orrery-head:6380"}
    scale = ["--namespace", "orrery", "scale", "statefulset/orrery-cpu-worker", "--replicas=3"]
    rc, argv, _, err = run_provider(default.get("create", ""), env)
    check(rc == 0 and argv == scale, f"cpu create runs kubectl scale ({rc}, {argv}, {err})")
    env["ORRERY_NODE_NAME"] = "orrery-cpu-worker-3"
    rc, argv, _, err = run_provider(default.get("delete", ""), env)
    check(rc == 0 and argv == scale, f"cpu delete runs kubectl scale ({rc}, {argv}, {err})")
    env["ORRERY_NODE_NAME"] = "orrery-cpu-worker-1"
    rc, argv, _, err = run_provider(default.get("delete", ""), env)
    check(rc != 0 and argv is None and "refusing" in err,
          "cpu delete of a pod that scaling would not remove is refused")

    tpu = groups.get("tpu-v4-16", {})
    if slice_facts:
        check(tpu.get("tpu") == {"accelerator_type": "v4-16",
                                 "topology": slice_facts["topology"],
                                 "hosts": slice_facts["hosts"]},
              "the TPU group's slice shape is the template's")
    prov = tpu.get("provider", {})
    check(prov.get("type") == "command", "the TPU group has its own command provider")
    env = {"POD_NAMESPACE": "orrery", "ORRERY_GROUP": "tpu-v4-16", "ORRERY_GROUP_SIZE": "1",
           "ORRERY_SLICE_NAME": "tpu-v4-16-0", "ORRERY_HEAD_ADDRESS": "orrery-head:6380",
           "ORRERY_SLICE_HOSTS": "tpu-v4-16-0-0,tpu-v4-16-0-1"}
    # The template is read from /etc/orrery in the pod; here from the repository.
    create = prov.get("create", "").replace(
        "/etc/orrery/tpu-slice.yaml", os.path.join(root, "deploy/kubernetes/tpu/tpu-slice.yaml"))
    rc, argv, applied, err = run_provider(create, env)
    check(rc == 0 and argv == ["--namespace", "orrery", "apply", "-f", "-"],
          f"TPU create runs kubectl apply -f - ({rc}, {argv}, {err})")
    if applied:
        check("__SLICE__" not in applied, "the applied slice has no __SLICE__ left")
        docs = [d for d in yaml.safe_load_all(applied) if d]
        names = sorted(f"{d['kind']}/{d['metadata']['name']}" for d in docs)
        check(names == ["Service/tpu-v4-16-0", "StatefulSet/tpu-v4-16-0"],
              f"the applied slice is a StatefulSet and a Service named for it ({names})")
        for d in docs:
            if d["kind"] == "StatefulSet":
                c = containers(d)[0]
                e = env_of(c)
                check(e["TPU_NAME"]["value"] == "tpu-v4-16-0", "the applied slice's TPU_NAME")
                check(e["TPU_WORKER_HOSTNAMES"]["value"].split(",")[1] ==
                      "tpu-v4-16-0-1.tpu-v4-16-0.$(POD_NAMESPACE).svc",
                      "the applied slice's TPU_WORKER_HOSTNAMES")
    rc, argv, _, err = run_provider(prov.get("delete", ""), env)
    check(rc == 0 and argv == ["--namespace", "orrery", "delete", "statefulset,service", "-l",
                               "orrery.io/tpu-slice=tpu-v4-16-0"],
          f"TPU delete removes the slice's objects by label ({rc}, {argv}, {err})")
    for bad in ("", "Bad/Name", "a;b"):
        for which in ("create", "delete"):
            rc, argv, _, _ = run_provider(prov.get(which, ""), dict(env, ORRERY_SLICE_NAME=bad))
            check(rc != 0 and argv is None, f"TPU {which} refuses the slice name {bad!r}")


def kubectl_parse(kubectl, root, expected):
    """`kubectl label --local -f DIR ... -o name`: kubectl reads and decodes every object
    without a server. Returns the names it printed."""
    with tempfile.TemporaryDirectory() as d:
        kubeconfig = os.path.join(d, "kubeconfig")
        open(kubeconfig, "w").close()  # no cluster, ever: not the user's kubeconfig
        env = dict(os.environ, KUBECONFIG=kubeconfig, HOME=d)
        names = []
        slice_file = os.path.join(d, "tpu-slice-tpu-v4-16-0.yaml")
        with open(os.path.join(root, "deploy/kubernetes/tpu/tpu-slice.yaml")) as f:
            open(slice_file, "w").write(f.read().replace("__SLICE__", "tpu-v4-16-0"))
        for target in (os.path.join(root, "deploy/kubernetes"), slice_file):
            cmd = [kubectl, "label", "--local", "-f", target, "orrery.io/offline-check=1",
                   "-o", "name"]
            print("$ " + " ".join(cmd))
            r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            print(r.stdout + r.stderr, end="")
            check(r.returncode == 0, f"kubectl label --local -f {target} exits 0")
            names += r.stdout.split()
        check(sorted(names) == sorted(expected),
              f"kubectl read every object ({len(names)} of {len(expected)})")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[1])
    files = sorted(glob.glob(os.path.join(root, "deploy/kubernetes/*.yaml")))
    objs = []
    for f in files:
        docs = load(f)
        for o in docs:
            for key in ("apiVersion", "kind", "metadata"):
                check(key in o, f"{os.path.basename(f)}: an object without {key}")
            if o.get("kind") != "Namespace":
                check(o["metadata"].get("namespace") == "orrery",
                      f"{o['kind']}/{o['metadata']['name']} is in the orrery namespace")
        objs += docs
    find(objs, "Namespace", "orrery")
    secrets = check_secrets(objs)
    check_redis(objs)
    check_head(objs, secrets)
    cpu_sts = check_cpu_workers(objs, secrets)
    slice_facts = check_tpu_slice(os.path.join(root, "deploy/kubernetes/tpu/tpu-slice.yaml"),
                                  secrets)
    check_autoscaler(objs, root, slice_facts, cpu_sts)
    print(f"checked {len(objs)} objects in {len(files)} files and the TPU slice template")

    kubectl = os.environ.get("ORRERY_KUBECTL") or shutil.which("kubectl")
    if not kubectl:
        if failures:
            return 1
        if os.environ.get("CI") == "true":  # CI installs kubernetes-client: a broken setup
            print("FAIL: kubectl is not installed (CI=true)", file=sys.stderr)
            return 1
        print("SKIP: kubectl is not installed (Debian: apt-get install kubernetes-client); "
              "the manifests were checked by this script only")
        return SKIP
    version = subprocess.run([kubectl, "version", "--client"], capture_output=True, text=True)
    print("kubectl: " + (version.stdout.strip().splitlines() or ["?"])[0])
    plural = {"StatefulSet": "statefulset.apps", "Deployment": "deployment.apps",
              "Role": "role.rbac.authorization.k8s.io",
              "RoleBinding": "rolebinding.rbac.authorization.k8s.io"}
    expected = [f"{plural.get(o['kind'], o['kind'].lower())}/{o['metadata']['name']}"
                for o in objs] + ["service/tpu-v4-16-0", "statefulset.apps/tpu-v4-16-0"]
    kubectl_parse(kubectl, root, expected)
    if failures:
        print(f"FAIL: {len(failures)} check(s) failed", file=sys.stderr)
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
