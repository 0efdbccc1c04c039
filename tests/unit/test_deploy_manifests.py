"""Offline checks of the deployment files: docker-compose.yml, deploy/docker, deploy/compose, k8s/.

Nothing here needs a cluster, a registry, a network or a Docker engine.

- Kubernetes core objects are validated (strict) against the JSON schemas bundled with
  kubernetes-validate. The CRD objects (KEDA ScaledObject, CloudNativePG Cluster) have no bundled
  schema and get structural checks here.
- The kustomizations are rendered with `kubectl kustomize` when kubectl is installed, otherwise by
  the small renderer below (resources, generators, namespace, images, replicas, JSON6902 patches);
  when kubectl is there, both renderings must agree.
- No compose-spec JSON schema ships with any installed package, so the compose file gets a focused
  structural check (known keys, depends_on conditions, healthchecks, volumes, interpolation).
  `docker compose config` runs in addition where the compose plugin is installed.
- The nginx gateway config is parsed and its `map` evaluated the way nginx does, against the
  routing table of the API.
"""

from __future__ import annotations

import base64
import copy
import fnmatch
import functools
import os
import re
import shutil
import subprocess
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import kubernetes_validate
import pytest
import yaml

from cairn.delivery.nats_logins import issuer_public_key
from cairn.local import LocalStack
from cairn.local.infra import NATS_SYNC_INTERVAL, SHARED_BUFFERS
from cairn.local.main import local_defaults

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "deploy" / "docker" / "Dockerfile"
DOCKERIGNORE = ROOT / "deploy" / "docker" / "Dockerfile.dockerignore"
NGINX_CONF = ROOT / "deploy" / "compose" / "nginx.conf"
NATS_CONF = ROOT / "deploy" / "compose" / "nats.conf"
OTEL_CONF = ROOT / "deploy" / "compose" / "otel-collector.yaml"
K8S = ROOT / "k8s"
K8S_NGINX_CONF = K8S / "base" / "gateway" / "nginx.conf"
NATS_VALUES = K8S / "values" / "nats.yaml"
CNPG_CLUSTER = K8S / "values" / "cnpg-cluster.yaml"

SERVICES = {"ingest": 8081, "session": 8082, "indexer": 8083, "recall": 8084, "consolidation": 8085}
HPA_SCALED = {"ingest", "recall"}
KEDA_SCALED = {"indexer", "consolidation"}
# the consumer of CAIRN_SESSION each scaled deployment runs (the indexer's is INDEXER_CONSUMER, cairn.events)
SESSION_STREAM_CONSUMERS = {"indexer": "indexer-transcripts", "consolidation": "consolidation"}
BUILDS = ("base", "overlays/dev", "overlays/prod")
# The deployment's model (cairn.llm.LlmSettings): every service gets them, the key from a Secret in k8s.
LLM_SETTINGS = (
    "CAIRN_LLM_BASE_URL",
    "CAIRN_LLM_MODEL",
    "CAIRN_LLM_API_KEY",
    "CAIRN_LLM_TIMEOUT_S",
    "CAIRN_LLM_ALLOWED_HOSTS",
)
# An older still-common release and the newest schema set kubernetes-validate bundles.
K8S_VERSIONS = ("1.33", kubernetes_validate.latest_version())
CRD_API_GROUPS = {"keda.sh", "postgresql.cnpg.io"}
# Secrets that are deliberately not part of a build: created by CloudNativePG, or out of band.
EXTERNAL_SECRETS = {
    "base": {"cairn-secrets", "cairn-pg-app"},
    "overlays/dev": {"cairn-pg-app"},
    "overlays/prod": {"cairn-secrets", "cairn-pg-app", "cairn-tls"},
}
# Compose services allowed to run without a healthcheck, and why.
NO_HEALTHCHECK = {"otel-collector": "distroless image: no shell or HTTP client to probe with"}

Obj = dict[str, Any]


# --------------------------------------------------------------------------------------------------
# YAML helpers
# --------------------------------------------------------------------------------------------------


def load_docs(path: Path) -> list[Obj]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc]


def load_one(path: Path) -> Obj:
    docs = load_docs(path)
    assert len(docs) == 1, f"{path}: expected one YAML document"
    return docs[0]


def api_group(obj: Obj) -> str:
    return str(obj["apiVersion"]).rpartition("/")[0]


def name_of(obj: Obj) -> str:
    return str(obj["metadata"]["name"])


def walk_strings(node: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(node, dict):
        return {key: walk_strings(value, fn) for key, value in node.items()}
    if isinstance(node, list):
        return [walk_strings(value, fn) for value in node]
    return fn(node) if isinstance(node, str) else node


# --------------------------------------------------------------------------------------------------
# kustomize: kubectl when installed, else a renderer for the features k8s/ uses
# --------------------------------------------------------------------------------------------------

SUPPORTED_KUSTOMIZE_KEYS = {
    "apiVersion",
    "kind",
    "namespace",
    "resources",
    "configMapGenerator",
    "secretGenerator",
    "images",
    "replicas",
    "patches",
}
CLUSTER_SCOPED_KINDS = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}


def render_kustomization(path: Path) -> list[Obj]:
    kustomization = load_one(path / "kustomization.yaml")
    unsupported = set(kustomization) - SUPPORTED_KUSTOMIZE_KEYS
    if unsupported:
        pytest.fail(f"{path}: extend the test's renderer for {sorted(unsupported)}")
    objects: list[Obj] = []
    for entry in kustomization.get("resources", []):
        target = path / entry
        objects += render_kustomization(target) if target.is_dir() else load_docs(target)
    for spec in kustomization.get("configMapGenerator", []):
        merge_or_add(objects, configmap(path, spec), spec.get("behavior", "create"))
    objects += [secret(path, spec) for spec in kustomization.get("secretGenerator", [])]
    transform(objects, kustomization)
    return objects


def merge_or_add(objects: list[Obj], generated: Obj, behavior: str) -> None:
    """A generator's object; `behavior: merge` adds its data to the one a base generated under the same name."""
    if behavior == "create":
        objects.append(generated)
        return
    assert behavior == "merge", f"the test's renderer supports generator behaviors create and merge, not {behavior}"
    (base,) = [o for o in objects if o["kind"] == generated["kind"] and name_of(o) == name_of(generated)]
    base["data"] = {**base.get("data", {}), **generated["data"]}


def transform(objects: list[Obj], kustomization: Obj) -> None:
    for patch in kustomization.get("patches", []):
        apply_patch(objects, patch)
    for item in kustomization.get("replicas", []):
        for obj in objects:
            if obj["kind"] == "Deployment" and name_of(obj) == item["name"]:
                obj["spec"]["replicas"] = item["count"]
    for image in kustomization.get("images", []):
        for container in all_containers(objects):
            set_image(container, image)
    for obj in objects:
        if "namespace" in kustomization and obj["kind"] not in CLUSTER_SCOPED_KINDS:
            obj["metadata"]["namespace"] = kustomization["namespace"]


def generated_data(path: Path, spec: Obj) -> dict[str, str]:
    unsupported = set(spec) - {"name", "literals", "files", "envs", "behavior"}
    if unsupported:
        pytest.fail(f"{path}: extend the test's renderer for generator fields {sorted(unsupported)}")
    data: dict[str, str] = {}
    for literal in spec.get("literals", []):
        key, _, value = literal.partition("=")
        data[key] = value
    for entry in spec.get("files", []):
        key, _, file = entry.rpartition("=")
        data[key or Path(file).name] = (path / file).read_text()
    for env_file in spec.get("envs", []):
        for line in (path / env_file).read_text().splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                key, _, value = line.partition("=")
                data[key.strip()] = value
    return data


def configmap(path: Path, spec: Obj) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": spec["name"]},
        "data": generated_data(path, spec),
    }


def secret(path: Path, spec: Obj) -> Obj:
    data = {k: base64.b64encode(v.encode()).decode() for k, v in generated_data(path, spec).items()}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": spec["name"]},
        "type": "Opaque",
        "data": data,
    }


def target_matches(obj: Obj, target: Obj) -> bool:
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    actual = {"kind": obj["kind"], "group": group, "version": version, "name": name_of(obj)}
    for key, value in actual.items():
        if key in target and not re.fullmatch(target[key], value):
            return False
    labels = obj["metadata"].get("labels", {})
    wanted = dict(pair.split("=", 1) for pair in target.get("labelSelector", "").split(",") if pair)
    return all(labels.get(k) == v for k, v in wanted.items())


def apply_patch(objects: list[Obj], patch: Obj) -> None:
    if set(patch) != {"target", "patch"}:
        pytest.fail(f"the test's renderer supports inline JSON6902 patches with a target only: {patch}")
    ops = yaml.safe_load(patch["patch"])
    if not isinstance(ops, list):
        pytest.fail(f"the test's renderer supports JSON6902 patches only, not strategic merge: {patch}")
    matched = [obj for obj in objects if target_matches(obj, patch["target"])]
    assert matched, f"patch target matches nothing: {patch['target']}"
    for obj in matched:
        for op in ops:
            json_patch_op(obj, op)


def json_patch_op(doc: Obj, op: Obj) -> None:
    tokens = [t.replace("~1", "/").replace("~0", "~") for t in op["path"].split("/")[1:]]
    parent: Any = doc
    for token in tokens[:-1]:
        parent = parent[int(token)] if isinstance(parent, list) else parent[token]
    last = tokens[-1]
    if isinstance(parent, list):
        index = len(parent) if last == "-" else int(last)
        if op["op"] == "add":
            parent.insert(index, copy.deepcopy(op["value"]))
            return
        if op["op"] == "remove":
            del parent[index]
            return
        parent[index] = copy.deepcopy(op["value"])
        return
    if op["op"] == "replace":
        assert last in parent, f"replace of a missing path {op['path']}"
    if op["op"] == "remove":
        del parent[last]
        return
    assert op["op"] in {"add", "replace"}, f"unsupported JSON patch op {op['op']}"
    parent[last] = copy.deepcopy(op["value"])


def pod_spec(obj: Obj) -> Obj | None:
    if obj["kind"] in {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}:
        return dict(obj["spec"]["template"]["spec"])
    return None


def all_containers(objects: list[Obj]) -> Iterator[Obj]:
    for obj in objects:
        if obj["kind"] in {"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"}:
            spec = obj["spec"]["template"]["spec"]
            yield from spec.get("initContainers", [])
            yield from spec["containers"]


def set_image(container: Obj, image: Obj) -> None:
    current = container["image"]
    base = current.split("@")[0]
    base = base.rsplit(":", 1)[0] if ":" in base.rsplit("/", 1)[-1] else base
    if base != image["name"]:
        return
    container["image"] = f"{image.get('newName', base)}:{image['newTag']}" if "newTag" in image else base


def kubectl_kustomize(path: Path) -> list[Obj] | None:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None
    result = subprocess.run([kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, f"kubectl kustomize {path} failed:\n{result.stderr}"
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@functools.cache
def _build(which: str) -> tuple[Obj, ...]:
    path = K8S / which
    rendered = kubectl_kustomize(path)
    return tuple(rendered if rendered is not None else render_kustomization(path))


def build(which: str) -> list[Obj]:
    return copy.deepcopy(list(_build(which)))


def by_kind(objects: list[Obj], kind: str) -> dict[str, Obj]:
    return {name_of(obj): obj for obj in objects if obj["kind"] == kind}


def generated(objects: list[Obj], kind: str, name: str) -> Obj:
    """A generated ConfigMap/Secret by its kustomization name (kustomize appends a content hash)."""
    found = [o for o in objects if o["kind"] == kind and re.fullmatch(rf"{name}(-[a-z0-9]{{10}})?", name_of(o))]
    assert len(found) == 1, f"{kind} {name}: {len(found)} found"
    return found[0]


def normalized(objects: list[Obj], generated_names: set[str]) -> list[Obj]:
    """Hash suffixes of generated names removed, Secret data decoded (kustomize wraps base64)."""
    pattern = re.compile(rf"^({'|'.join(map(re.escape, sorted(generated_names)))})-[a-z0-9]{{10}}$")
    result = []
    for obj in objects:
        obj = walk_strings(obj, lambda s: pattern.sub(r"\1", s))
        if obj["kind"] == "Secret":
            obj["data"] = {k: base64.b64decode(v).decode() for k, v in obj.get("data", {}).items()}
        result.append(obj)
    return sorted(result, key=lambda obj: (obj["kind"], name_of(obj)))


# --------------------------------------------------------------------------------------------------
# Kubernetes: files, schemas, rendering
# --------------------------------------------------------------------------------------------------


def referenced_files(path: Path) -> set[Path]:
    kustomization = load_one(path / "kustomization.yaml")
    files = {path / "kustomization.yaml"}
    for entry in kustomization.get("resources", []):
        target = (path / entry).resolve()
        files |= referenced_files(target) if target.is_dir() else {target}
    for generator in kustomization.get("configMapGenerator", []) + kustomization.get("secretGenerator", []):
        files |= {(path / f.rpartition("=")[2]).resolve() for f in generator.get("files", [])}
    return files


def test_every_k8s_file_is_part_of_a_build() -> None:
    used = set().union(*(referenced_files(K8S / which) for which in BUILDS))
    on_disk = {p.resolve() for p in (K8S / "base").rglob("*") if p.is_file()}
    on_disk |= {p.resolve() for p in (K8S / "overlays").rglob("*") if p.is_file()}
    assert on_disk - used == set(), "files in k8s/base or k8s/overlays that no kustomization uses"


@pytest.mark.parametrize("which", BUILDS)
def test_every_object_is_well_formed(which: str) -> None:
    objects = build(which)
    seen: set[tuple[str, str]] = set()
    for obj in objects:
        assert {"apiVersion", "kind", "metadata"} <= set(obj), obj
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name_of(obj)), name_of(obj)
        key = (obj["kind"], name_of(obj))
        assert key not in seen, f"duplicate {key}"
        seen.add(key)
        if obj["kind"] not in CLUSTER_SCOPED_KINDS:
            assert obj["metadata"].get("namespace") == "cairn", f"{key} is not in namespace cairn"


@pytest.fixture(scope="module", autouse=True)
def _read_each_schema_once() -> Iterator[None]:
    """kubernetes-validate re-reads megabytes of JSON schema for every object: cache the reads."""
    utils = kubernetes_validate.utils
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(utils, "schema_contents", functools.cache(utils.schema_contents))
        yield


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("which", BUILDS)
def test_core_objects_validate_against_kubernetes_schemas(which: str, version: str) -> None:
    core = [obj for obj in build(which) if api_group(obj) not in CRD_API_GROUPS]
    assert len(core) > 20
    errors = []
    for obj in core:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            path = ".".join(str(p) for p in exc.path)
            errors.append(f"{obj['kind']}/{name_of(obj)}: {path}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError as exc:
            errors.append(f"{obj['kind']}/{name_of(obj)}: {exc.message}")
    assert errors == []


def test_the_validator_rejects_a_broken_deployment() -> None:
    """Guards the test above: a typo in a Deployment must not pass unnoticed."""
    deployment = by_kind(build("base"), "Deployment")["ingest"]
    deployment["spec"]["template"]["spec"]["containers"][0]["livenesProbe"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSIONS[-1], strict=True)


def test_test_renderer_agrees_with_kubectl_kustomize() -> None:
    if shutil.which("kubectl") is None:
        pytest.skip("kubectl is not installed: the builds above used the test's own renderer")
    for which in BUILDS:
        ours = render_kustomization(K8S / which)
        names = {name_of(o) for o in ours if o["kind"] in {"ConfigMap", "Secret"}}
        assert normalized(build(which), names) == normalized(ours, names), which


# --------------------------------------------------------------------------------------------------
# Kubernetes: workloads
# --------------------------------------------------------------------------------------------------

QUANTITY = re.compile(r"^([0-9.]+)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$")
FACTORS = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
FACTORS["Ti"] = 2**40


def quantity(value: str | int | float) -> float:
    match = QUANTITY.match(str(value))
    assert match, f"not a quantity: {value!r}"
    return float(match.group(1)) * FACTORS[match.group(2)]


def workloads(objects: list[Obj]) -> list[Obj]:
    return [obj for obj in objects if obj["kind"] in {"Deployment", "Job"}]


def port_numbers(container: Obj) -> dict[str | int, int]:
    ports: dict[str | int, int] = {}
    for port in container.get("ports", []):
        ports[port["containerPort"]] = port["containerPort"]
        if "name" in port:
            ports[port["name"]] = port["containerPort"]
    return ports


def check_probes(obj: Obj, container: Obj) -> None:
    where = f"{name_of(obj)}/{container['name']}"
    for probe in ("livenessProbe", "readinessProbe"):
        assert probe in container, f"{where} has no {probe}"
        http = container[probe].get("httpGet")
        if http is not None:
            assert http["port"] in port_numbers(container), f"{where} {probe} probes an undeclared port"
    if name_of(obj) in SERVICES:
        assert container["livenessProbe"]["httpGet"]["path"] == "/healthz", where
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz", where


def check_resources(where: str, container: Obj) -> None:
    resources = container.get("resources", {})
    for resource in ("cpu", "memory"):
        request = resources.get("requests", {}).get(resource)
        limit = resources.get("limits", {}).get(resource)
        assert request is not None, f"{where}: no {resource} request"
        assert limit is not None, f"{where}: no {resource} limit"
        assert quantity(request) <= quantity(limit), f"{where}: {resource} request above its limit"


def check_security(obj: Obj, spec: Obj, container: Obj) -> None:
    """The `restricted` Pod Security profile, plus a read-only root with a writable /tmp."""
    where = f"{name_of(obj)}/{container['name']}"
    pod_ctx = spec.get("securityContext", {})
    ctx = {**pod_ctx, **container.get("securityContext", {})}
    assert ctx.get("runAsNonRoot") is True, f"{where} may run as root"
    assert ctx.get("runAsUser", 1) != 0, f"{where} runs as uid 0"
    assert ctx.get("readOnlyRootFilesystem") is True, f"{where} has a writable root filesystem"
    assert ctx.get("allowPrivilegeEscalation") is False, where
    assert "ALL" in ctx.get("capabilities", {}).get("drop", []), f"{where} keeps capabilities"
    assert ctx.get("seccompProfile", {}).get("type") == "RuntimeDefault", where
    assert spec.get("automountServiceAccountToken") is False, f"{where} gets an API token it does not use"
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    tmp = [m for m in container.get("volumeMounts", []) if m["mountPath"] == "/tmp"]
    assert tmp, f"{where}: no /tmp mount"
    assert "emptyDir" in volumes[tmp[0]["name"]], f"{where}: /tmp must be an emptyDir"


@pytest.mark.parametrize("which", BUILDS)
def test_workloads_are_probed_bounded_and_unprivileged(which: str) -> None:
    objects = build(which)
    assert set(SERVICES) | {"gateway", "redis"} <= set(by_kind(objects, "Deployment"))
    for obj in workloads(objects):
        spec = obj["spec"]["template"]["spec"]
        for container in spec["containers"]:
            if obj["kind"] == "Deployment":
                check_probes(obj, container)
            check_resources(f"{name_of(obj)}/{container['name']}", container)
            check_security(obj, spec, container)


def selects(selector: Obj, labels: dict[str, str]) -> bool:
    for key, value in selector.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions", []):
        present = expr["key"] in labels
        value = labels.get(expr["key"])
        checks = {
            "In": present and value in expr.get("values", []),
            "NotIn": not present or value not in expr.get("values", []),
            "Exists": present,
            "DoesNotExist": not present,
        }
        if not checks[expr["operator"]]:
            return False
    return True


def pod_templates(objects: list[Obj]) -> list[tuple[Obj, Obj]]:
    return [(obj, obj["spec"]["template"]) for obj in workloads(objects)]


@pytest.mark.parametrize("which", BUILDS)
def test_services_select_pods_and_ports_exist(which: str) -> None:
    objects = build(which)
    for deployment in by_kind(objects, "Deployment").values():
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert selects(deployment["spec"]["selector"], labels), f"{name_of(deployment)} selects no pod"
    for service in by_kind(objects, "Service").values():
        selector = {"matchLabels": service["spec"]["selector"]}
        pods = [tpl for _, tpl in pod_templates(objects) if selects(selector, tpl["metadata"]["labels"])]
        assert len(pods) == 1, f"Service {name_of(service)} selects {len(pods)} pod templates"
        ports = port_numbers(pods[0]["spec"]["containers"][0])
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in ports, f"Service {name_of(service)}: no container port {port}"
            if name_of(service) in SERVICES:
                assert port["port"] == SERVICES[name_of(service)] == ports[port["targetPort"]]


def container_env(container: Obj) -> dict[str, Obj]:
    return {item["name"]: item for item in container.get("env", [])}


def cairn_containers(objects: list[Obj]) -> dict[str, Obj]:
    deployments = by_kind(objects, "Deployment")
    found = {name: deployments[name]["spec"]["template"]["spec"]["containers"][0] for name in SERVICES}
    found["migrate"] = by_kind(objects, "Job")["cairn-migrate"]["spec"]["template"]["spec"]["containers"][0]
    return found


@pytest.mark.parametrize("which", BUILDS)
def test_each_service_runs_its_console_script_on_its_port(which: str) -> None:
    containers = cairn_containers(build(which))
    for name, port in SERVICES.items():
        container = containers[name]
        env = container_env(container)
        assert container["command"] == [f"cairn-{name}"]
        assert env["CAIRN_HTTP_PORT"]["value"] == str(port)
        assert port_numbers(container)["http"] == port
        assert env["OTEL_SERVICE_NAME"]["value"] == f"cairn-{name}"
        assert env["CAIRN_POSTGRES_URL"]["valueFrom"]["secretKeyRef"]["key"] == "CAIRN_POSTGRES_URL"
        assert ("CAIRN_ADMIN_TOKEN" in env) == (name == "ingest"), "the admin token is for ingest only"
        assert "CAIRN_POSTGRES_ADMIN_URL" not in env, "the owner URL is for the migration only"
    migrate = container_env(containers["migrate"])
    assert containers["migrate"]["command"] == ["cairn", "migrate"]
    assert {"CAIRN_POSTGRES_ADMIN_URL", "CAIRN_POSTGRES_APP_PASSWORD"} <= set(migrate)
    images = {c["image"] for c in containers.values()}
    assert len(images) == 1, f"the cairn containers run different images: {images}"
    if which != "base":
        image = images.pop()
        assert re.search(r":[\w.-]+$", image), f"untagged image {image}"
        assert not image.endswith(":latest"), f"unpinned image {image}"


def configmap_data(objects: list[Obj], name: str) -> dict[str, str]:
    return dict(by_kind(objects, "ConfigMap")[name]["data"])


@pytest.mark.parametrize("which", BUILDS)
def test_shared_settings_configmap(which: str) -> None:
    objects = build(which)
    config_refs = {
        ref["configMapRef"]["name"]
        for c in cairn_containers(objects).values()
        for ref in c.get("envFrom", [])
        if "configMapRef" in ref
    }
    assert len(config_refs) == 1
    data = configmap_data(objects, config_refs.pop())
    assert data["CAIRN_HTTP_HOST"] == "0.0.0.0"
    assert data["OTEL_TRACES_EXPORTER"] == "otlp"
    assert data["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    assert urlsplit(data["OTEL_EXPORTER_OTLP_ENDPOINT"]).port == 4318
    assert "CAIRN_NATS_URL" not in data, "logins are per container, from the Secret"
    assert "CAIRN_REDIS_URL" not in data
    assert not any(re.search(r"PASSWORD|TOKEN|SECRET|_URL$", k) and "@" in v for k, v in data.items())


@pytest.mark.parametrize("which", BUILDS)
def test_every_container_logs_in_to_nats_as_its_own_user_and_to_redis_with_the_password(which: str) -> None:
    """NATS refuses anonymous clients (k8s/values/nats.yaml): each service's URL names its own user, the migration the
    operator's; the passwords come from `cairn-secrets`, defined before the URLs that expand them."""
    objects = build(which)
    users = {u["user"] for u in load_one(NATS_VALUES)["config"]["merge"]["authorization"]["users"]}
    for name, container in cairn_containers(objects).items():
        env = [e["name"] for e in container["env"]]
        values = {e["name"]: e.get("value") for e in container["env"]}
        nats = urlsplit(values["CAIRN_NATS_URL"])
        assert (nats.scheme, nats.hostname, nats.port) == ("nats", load_one(NATS_VALUES)["fullnameOverride"], 4222)
        assert nats.password == "$(CAIRN_NATS_PASSWORD)"
        assert env.index("CAIRN_NATS_PASSWORD") < env.index("CAIRN_NATS_URL")
        expected = "cairn-operator" if "migrate" in name else f"cairn-{name}"
        assert nats.username == expected, name
        assert expected in users
        if "migrate" not in name:
            redis = urlsplit(values["CAIRN_REDIS_URL"])
            assert redis.password == "$(CAIRN_REDIS_PASSWORD)"
            assert env.index("CAIRN_REDIS_PASSWORD") < env.index("CAIRN_REDIS_URL")
            assert redis.port == by_kind(objects, "Service")[str(redis.hostname)]["spec"]["ports"][0]["port"]


def references(objects: list[Obj]) -> Iterator[tuple[str, str, str | None]]:
    """(kind, name, key) of every ConfigMap/Secret a workload refers to."""
    for obj in workloads(objects):
        spec = obj["spec"]["template"]["spec"]
        for volume in spec.get("volumes", []):
            if "configMap" in volume:
                yield "ConfigMap", volume["configMap"]["name"], None
            if "secret" in volume:
                yield "Secret", volume["secret"]["secretName"], None
        for container in spec["containers"]:
            yield from env_references(container)


def env_references(container: Obj) -> Iterator[tuple[str, str, str | None]]:
    for ref in container.get("envFrom", []):
        for field, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
            if field in ref:
                yield kind, ref[field]["name"], None
    for item in container.get("env", []):
        source = item.get("valueFrom", {})
        for field, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
            if field in source:
                yield kind, source[field]["name"], source[field]["key"]


@pytest.mark.parametrize("which", BUILDS)
def test_configmap_and_secret_references_resolve(which: str) -> None:
    objects = build(which)
    external = EXTERNAL_SECRETS[which]
    for kind, name, key in references(objects):
        if kind == "Secret" and name in external:
            continue
        found = by_kind(objects, kind)
        assert name in found, f"{kind} {name} is referenced but not in the {which} build"
        if key is not None:
            assert key in found[name].get("data", {}), f"{kind} {name} has no key {key}"
    tls = {t["secretName"] for i in by_kind(objects, "Ingress").values() for t in i["spec"].get("tls", [])}
    assert tls <= external | set(by_kind(objects, "Secret"))


def secret_data(objects: list[Obj], name: str) -> dict[str, str]:
    data = generated(objects, "Secret", name)["data"]
    return {k: base64.b64decode(v).decode() for k, v in data.items()}


def test_dev_secrets_match_the_database_and_are_dev_only() -> None:
    cluster = load_one(CNPG_CLUSTER)
    secrets = secret_data(build("overlays/dev"), "cairn-secrets")
    url = urlsplit(secrets["CAIRN_POSTGRES_URL"])
    assert url.scheme in {"postgresql", "postgres"}
    assert url.hostname == f"{name_of(cluster)}-rw", "the services must use the CNPG primary Service"
    assert url.path == "/" + cluster["spec"]["bootstrap"]["initdb"]["database"]
    assert url.username == "cairn_app"
    assert url.password == secrets["CAIRN_POSTGRES_APP_PASSWORD"], "migrate sets a different password"
    for key in ("CAIRN_POSTGRES_APP_PASSWORD", "CAIRN_ADMIN_TOKEN"):
        assert "dev-only" in secrets[key]
    assert not by_kind(build("overlays/prod"), "Secret"), "prod secrets live outside git"


def test_migration_reads_the_owner_url_from_cloudnativepg() -> None:
    cluster = load_one(CNPG_CLUSTER)
    migrate = container_env(cairn_containers(build("base"))["migrate"])
    ref = migrate["CAIRN_POSTGRES_ADMIN_URL"]["valueFrom"]["secretKeyRef"]
    assert (ref["name"], ref["key"]) == (f"{name_of(cluster)}-app", "uri")
    job = by_kind(build("base"), "Job")["cairn-migrate"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"
    assert job["spec"]["backoffLimit"] >= 1


# --------------------------------------------------------------------------------------------------
# Kubernetes: scaling, disruption, network
# --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("which", BUILDS)
def test_hpas_scale_ingest_and_recall_on_cpu(which: str) -> None:
    objects = build(which)
    deployments = by_kind(objects, "Deployment")
    hpas = by_kind(objects, "HorizontalPodAutoscaler")
    targets = {hpa["spec"]["scaleTargetRef"]["name"]: hpa for hpa in hpas.values()}
    assert set(targets) == HPA_SCALED
    for name, hpa in targets.items():
        assert hpa["spec"]["scaleTargetRef"]["kind"] == "Deployment"
        assert name in deployments
        assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
        metrics = [m["resource"]["name"] for m in hpa["spec"]["metrics"] if m["type"] == "Resource"]
        assert metrics == ["cpu"]
        cpu_request = deployments[name]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
        assert "cpu" in cpu_request, "CPU utilization needs a CPU request"
    for name in HPA_SCALED | KEDA_SCALED:
        assert "replicas" not in deployments[name]["spec"], f"{name}: a fixed count fights the autoscaler"


SCALED_OBJECT_SPEC_KEYS = {
    "scaleTargetRef", "minReplicaCount", "maxReplicaCount", "pollingInterval", "cooldownPeriod",
    "idleReplicaCount", "initialCooldownPeriod", "fallback", "advanced", "triggers",
}  # fmt: skip


def streams_declared_in_code() -> set[str]:
    from cairn.events.streams import STREAMS

    return {spec.name for spec in STREAMS}


@pytest.mark.parametrize("which", BUILDS)
def test_keda_scales_indexer_and_consolidation_on_consumer_lag(which: str) -> None:
    from cairn.events import INDEXER_CONSUMER

    assert SESSION_STREAM_CONSUMERS["indexer"] == INDEXER_CONSUMER
    objects = build(which)
    deployments = by_kind(objects, "Deployment")
    scaled = by_kind(objects, "ScaledObject")
    nats_host = f"{load_one(NATS_VALUES)['fullnameOverride']}-headless.cairn.svc.cluster.local"
    assert {obj["spec"]["scaleTargetRef"]["name"] for obj in scaled.values()} == KEDA_SCALED
    for obj in scaled.values():
        assert obj["apiVersion"] == "keda.sh/v1alpha1"
        assert set(obj["spec"]) <= SCALED_OBJECT_SPEC_KEYS, f"unknown keys in ScaledObject {name_of(obj)}"
        target = obj["spec"]["scaleTargetRef"]["name"]
        assert target in deployments
        assert obj["spec"]["scaleTargetRef"].get("kind", "Deployment") == "Deployment"
        assert 1 <= obj["spec"]["minReplicaCount"] <= obj["spec"]["maxReplicaCount"]
        (trigger,) = obj["spec"]["triggers"]
        meta = trigger["metadata"]
        assert trigger["type"] == "nats-jetstream"
        assert meta["stream"] == "CAIRN_SESSION"
        assert meta["stream"] in streams_declared_in_code()
        assert meta["consumer"] == SESSION_STREAM_CONSUMERS[target]
        assert meta["account"] == "$G"
        assert meta["natsServerMonitoringEndpoint"] == f"{nats_host}:8222"
        assert int(meta["lagThreshold"]) > 0
        assert all(isinstance(v, str) for v in meta.values()), "KEDA trigger metadata values are strings"


@pytest.mark.parametrize("which", BUILDS)
def test_every_service_has_a_disruption_budget(which: str) -> None:
    objects = build(which)
    pdbs = by_kind(objects, "PodDisruptionBudget").values()
    for name in [*SERVICES, "gateway"]:
        labels = by_kind(objects, "Deployment")[name]["spec"]["template"]["metadata"]["labels"]
        matching = [pdb for pdb in pdbs if selects(pdb["spec"]["selector"], labels)]
        assert len(matching) == 1, f"{name}: {len(matching)} PodDisruptionBudgets"
        assert "maxUnavailable" in matching[0]["spec"], "minAvailable blocks drains of 1-replica overlays"


# Pods that live in namespace cairn but come from the NATS chart and CloudNativePG.
EXTERNAL_POD_LABELS = [
    {"app.kubernetes.io/name": "nats", "app.kubernetes.io/instance": "nats"},
    {"cnpg.io/cluster": "cairn-pg", "cnpg.io/instanceRole": "primary"},
]


def ingress_rules_for(policies: list[Obj], labels: dict[str, str]) -> list[Obj]:
    return [
        rule
        for policy in policies
        if "Ingress" in policy["spec"]["policyTypes"] and selects(policy["spec"]["podSelector"], labels)
        for rule in policy["spec"].get("ingress", [])
    ]


def allows(rule: Obj, source: dict[str, str], port: int, container: Obj) -> bool:
    peers = [peer for peer in rule.get("from", []) if set(peer) == {"podSelector"}]
    if not any(selects(peer["podSelector"], source) for peer in peers):
        return False
    return any(port_numbers(container).get(p["port"]) == port for p in rule.get("ports", []))


@pytest.mark.parametrize("which", BUILDS)
def test_network_policies(which: str) -> None:
    objects = build(which)
    policies = list(by_kind(objects, "NetworkPolicy").values())
    deny = [p for p in policies if p["spec"]["podSelector"] == {} and not p["spec"].get("ingress")]
    assert deny, "no default-deny ingress policy"
    assert deny[0]["spec"]["policyTypes"] == ["Ingress"]
    templates = {name_of(obj): tpl for obj, tpl in pod_templates(objects)}
    pod_labels = [tpl["metadata"]["labels"] for tpl in templates.values()] + EXTERNAL_POD_LABELS
    for policy in policies:
        assert any(selects(policy["spec"]["podSelector"], labels) for labels in pod_labels), name_of(policy)
    gateway = templates["gateway"]["metadata"]["labels"]
    for name, port in SERVICES.items():
        template = templates[name]
        rules = ingress_rules_for(policies, template["metadata"]["labels"])
        reachable = any(allows(r, gateway, port, template["spec"]["containers"][0]) for r in rules)
        assert reachable == (name in {"ingest", "recall"}), f"gateway -> {name} should be {not reachable}"
        if name not in {"ingest", "recall"}:
            others = [rule for rule in rules if rule != PROMETHEUS_SCRAPE]
            assert others == [], f"{name} takes no traffic but Prometheus's scrapes, yet a policy admits some"


# The one way in for Prometheus: from its namespace, to the `http` port (GET /metrics).
PROMETHEUS_SCRAPE = {
    "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
    "ports": [{"port": "http", "protocol": "TCP"}],
}


@pytest.mark.parametrize("which", BUILDS)
def test_prometheus_may_scrape_every_service_where_its_annotations_say(which: str) -> None:
    objects = build(which)
    policies = list(by_kind(objects, "NetworkPolicy").values())
    templates = {name_of(obj): tpl for obj, tpl in pod_templates(objects)}
    for name, port in SERVICES.items():
        template = templates[name]
        annotations = template["metadata"].get("annotations", {})
        assert annotations.get("prometheus.io/scrape") == "true", name
        assert annotations.get("prometheus.io/path") == "/metrics", name
        assert int(annotations["prometheus.io/port"]) == port == port_numbers(template["spec"]["containers"][0])["http"]
        assert PROMETHEUS_SCRAPE in ingress_rules_for(policies, template["metadata"]["labels"]), name


def egress_ports(policies: list[Obj], labels: dict[str, str]) -> set[int]:
    return {
        port["port"]
        for policy in policies
        if "Egress" in policy["spec"]["policyTypes"] and selects(policy["spec"]["podSelector"], labels)
        for rule in policy["spec"].get("egress", [])
        for port in rule.get("ports", [])
    }


def test_services_may_reach_their_dependencies() -> None:
    objects = build("base")
    policies = list(by_kind(objects, "NetworkPolicy").values())
    for obj, template in pod_templates(objects):
        if name_of(obj) in SERVICES or obj["kind"] == "Job":
            ports = egress_ports(policies, template["metadata"]["labels"])
            assert {53, 4222, 5432, 6379, 4318} <= ports, f"{name_of(obj)} cannot reach {ports}"


@pytest.mark.parametrize("which", BUILDS)
def test_ingress_points_at_the_gateway(which: str) -> None:
    objects = build(which)
    (ingress,) = by_kind(objects, "Ingress").values()
    services = by_kind(objects, "Service")
    for rule in ingress["spec"]["rules"]:
        for path in rule["http"]["paths"]:
            backend = path["backend"]["service"]
            assert backend["name"] == "gateway"
            port_names = {p.get("name") for p in services["gateway"]["spec"]["ports"]}
            assert backend["port"].get("name") in port_names
            assert "/v1/messages".startswith(path["path"])
            assert "/v1/recall".startswith(path["path"])


def test_gateway_uses_the_compose_nginx_config() -> None:
    assert K8S_NGINX_CONF.read_bytes() == NGINX_CONF.read_bytes(), "k8s/base/gateway/nginx.conf drifted"
    objects = build("base")
    gateway = by_kind(objects, "Deployment")["gateway"]["spec"]["template"]["spec"]
    mount = next(m for m in gateway["containers"][0]["volumeMounts"] if m["mountPath"] == "/etc/nginx/nginx.conf")
    volume = next(v for v in gateway["volumes"] if v["name"] == mount["name"])
    assert configmap_data(objects, volume["configMap"]["name"])[mount["subPath"]] == NGINX_CONF.read_text()
    services = by_kind(objects, "Service")
    for name, (host, port) in nginx_upstreams().items():
        assert host in services, f"upstream {name}: no Service {host}"
        assert port in {p["port"] for p in services[host]["spec"]["ports"]}, f"upstream {name}: port {port}"


@pytest.mark.parametrize("which", ["overlays/dev", "overlays/prod"])
def test_overlays_size_the_deployment(which: str) -> None:
    base, overlay = build("base"), build(which)
    assert by_kind(overlay, "Deployment")["session"]["spec"]["replicas"] >= 1
    hpa = by_kind(overlay, "HorizontalPodAutoscaler")["ingest"]["spec"]
    assert hpa != by_kind(base, "HorizontalPodAutoscaler")["ingest"]["spec"], "overlay patches not applied"
    prod = which.endswith("prod")
    assert (hpa["minReplicas"] >= 2) == prod, "prod runs redundant replicas, dev one"
    if prod:
        assert by_kind(overlay, "Deployment")["session"]["spec"]["replicas"] >= 2
        assert by_kind(overlay, "Ingress")["cairn"]["spec"].get("tls"), "prod serves TLS"


# --------------------------------------------------------------------------------------------------
# Helm values and the CloudNativePG cluster (CRD: structural checks)
# --------------------------------------------------------------------------------------------------


def test_nats_values_enable_replicated_jetstream_on_disk() -> None:
    values = load_one(NATS_VALUES)
    jetstream = values["config"]["jetstream"]
    assert jetstream["enabled"] is True
    assert jetstream["fileStore"]["enabled"] is True
    assert jetstream["fileStore"]["pvc"]["enabled"] is True
    quantity(jetstream["fileStore"]["pvc"]["size"])
    assert values["config"]["cluster"] == {"enabled": True, "replicas": 3}
    assert values["config"]["monitor"]["port"] == 8222, "KEDA reads consumer lag on the monitoring port"
    assert values["container"]["image"]["tag"].startswith("2.15"), "same NATS line as compose"


def test_nats_fsyncs_every_write_in_k8s_compose_and_the_local_stack() -> None:
    """JetStream's default acknowledges a write before it is on disk (flushed every two minutes): an OS crash or a
    power cut would lose events ingest already answered 202 for."""
    assert load_one(NATS_VALUES)["config"]["jetstream"]["merge"]["sync_interval"] == "always"
    nats = compose()["services"]["nats"]
    config = nats["command"][nats["command"].index("-c") + 1]
    mounted = {v.split(":")[1]: v.split(":")[0] for v in nats["volumes"]}
    text = (ROOT / mounted[config]).read_text()
    jetstream = re.search(r"jetstream\s*\{([^}]*)\}", text)
    assert jetstream, "compose's NATS config has a jetstream block"
    assert re.search(r"^\s*sync_interval:\s*always\s*$", jetstream[1], re.M)
    assert re.search(r'^\s*store_dir:\s*"/data"\s*$', jetstream[1], re.M)
    assert "nats-data:/data" in nats["volumes"]
    assert re.search(r"^http:\s*8222$", text, re.M), "the healthcheck reads the monitoring port"
    assert NATS_SYNC_INTERVAL == "always"


@pytest.mark.parametrize(("which", "replicas"), [("base", "3"), ("overlays/prod", "3"), ("overlays/dev", "1")])
def test_streams_are_declared_with_as_many_replicas_as_there_are_nats_servers(which: str, replicas: str) -> None:
    """The migration declares every stream on the NATS servers the Helm values run: 3 in a cluster, so the loss of a
    node loses no stream; the dev overlay's single server (cluster disabled) can keep only 1."""
    migrate = cairn_containers(build(which))["migrate"]
    (config,) = [ref["configMapRef"]["name"] for ref in migrate["envFrom"] if "configMapRef" in ref]
    assert configmap_data(build(which), config)["CAIRN_NATS_STREAM_REPLICAS"] == replicas
    if which != "overlays/dev":
        assert str(load_one(NATS_VALUES)["config"]["cluster"]["replicas"]) == replicas
    compose_env = compose()["services"]["migrate"]["environment"]
    assert compose_env["CAIRN_NATS_STREAM_REPLICAS"] == "1", "compose runs one NATS server"


def test_cnpg_cluster_runs_pgvector_and_creates_the_database() -> None:
    cluster = load_one(CNPG_CLUSTER)
    assert (cluster["apiVersion"], cluster["kind"]) == ("postgresql.cnpg.io/v1", "Cluster")
    assert cluster["metadata"]["namespace"] == "cairn"
    spec = cluster["spec"]
    assert spec["instances"] >= 1
    assert quantity(spec["storage"]["size"]) > 0
    assert "pgvector" in spec["imageName"]
    assert not spec["imageName"].startswith("ghcr.io/cloudnative-pg/")
    assert re.search(r"pg18", spec["imageName"]), "same PostgreSQL major as compose"
    if spec["imageName"].startswith("pgvector/pgvector"):
        assert (spec["postgresUID"], spec["postgresGID"]) == (999, 999), "official images run postgres as 999"
    initdb = spec["bootstrap"]["initdb"]
    assert initdb["database"] == "cairn"
    assert initdb["owner"]
    assert any("CREATE EXTENSION IF NOT EXISTS vector" in sql for sql in initdb["postInitApplicationSQL"])
    for key, value in spec["postgresql"]["parameters"].items():
        assert isinstance(value, str), f"postgresql parameter {key} must be a string"


def test_postgres_has_the_same_buffer_cache_in_k8s_compose_and_the_local_stack() -> None:
    """A large agent's memory search reads its HNSW graph and chunk rows from the buffer cache: with the default
    128 MB they are read again from the OS on every query (about 340 reads per search at 100k chunks)."""
    size = load_one(CNPG_CLUSTER)["spec"]["postgresql"]["parameters"]["shared_buffers"]
    command = compose()["services"]["postgres"]["command"]
    assert command[0] == "postgres"
    assert f"shared_buffers={size}" in command[1:], "compose runs postgres with the cluster's shared_buffers"
    assert size == SHARED_BUFFERS, "the local stack starts postgres with the cluster's shared_buffers"


# --------------------------------------------------------------------------------------------------
# nginx gateway
# --------------------------------------------------------------------------------------------------

NGINX_TOKEN = re.compile(r"""\s+|#[^\n]*|"((?:\\.|[^"\\])*)"|'((?:\\.|[^'\\])*)'|([{};])|([^\s{};"'#]+)""")


def nginx_tokens(text: str) -> Iterator[str]:
    pos = 0
    while pos < len(text):
        match = NGINX_TOKEN.match(text, pos)
        assert match, f"cannot tokenize nginx.conf at {text[pos : pos + 40]!r}"
        pos = match.end()
        for group in match.groups():
            if group is not None:
                yield group


def nginx_parse(tokens: Iterator[str]) -> list[tuple[str, list[str], list[Any] | None]]:
    """[(directive, args, block or None)] — enough of nginx's grammar for our config."""
    directives: list[tuple[str, list[str], list[Any] | None]] = []
    words: list[str] = []
    for token in tokens:
        if token == ";":
            directives.append((words[0], words[1:], None))
            words = []
        elif token == "{":
            directives.append((words[0], words[1:], nginx_parse(tokens)))
            words = []
        elif token == "}":
            break
        else:
            words.append(token)
    assert words == [], f"unterminated directive {words}"
    return directives


@functools.cache
def nginx_http() -> tuple[tuple[str, tuple[str, ...], Any], ...]:
    config = nginx_parse(nginx_tokens(NGINX_CONF.read_text()))
    (http,) = [block for name, _, block in config if name == "http"]
    assert http is not None
    return tuple((name, tuple(args), block) for name, args, block in http)


def nginx_upstreams() -> dict[str, tuple[str, int]]:
    upstreams = {}
    for name, args, block in nginx_http():
        if name == "upstream":
            (server,) = [a for d, a, _ in block if d == "server"]
            host, _, port = server[0].rpartition(":")
            upstreams[args[0]] = (host, int(port))
    return upstreams


@functools.cache
def nginx_router() -> Callable[[str, str], str]:
    """Evaluates the gateway's `map` like nginx: exact keys, then regexes in order, then default."""
    (mapping,) = [(args, block) for name, args, block in nginx_http() if name == "map"]
    (source, variable), block = mapping
    assert source == "$request_method:$uri", "the emulation below assumes this map key"
    exact: dict[str, str] = {}
    regexes: list[tuple[re.Pattern[str], str]] = []
    default = ""
    for key, (value,), _ in block:
        if key == "default":
            default = value
        elif key.startswith("~*"):
            regexes.append((re.compile(key[2:], re.IGNORECASE), value))
        elif key.startswith("~"):
            regexes.append((re.compile(key[1:]), value))
        else:
            exact[key] = value
    (location,) = [
        b for s, _, blk in nginx_http() if s == "server" for d, a, b in blk if d == "location" and list(a) == ["/v1/"]
    ]
    proxy_pass = [args[0] for d, args, _ in location if d == "proxy_pass"]
    assert proxy_pass == [f"http://{variable}"], "location /v1/ must proxy to the routing variable"

    def route(method: str, path: str) -> str:
        key = f"{method}:{path}"
        if key in exact:
            return exact[key]
        return next((value for pattern, value in regexes if pattern.search(key)), default)

    return route


API_ROUTES = [
    ("POST", "/v1/messages", "ingest"),
    ("POST", "/v1/messages/batch", "ingest"),
    ("POST", "/v1/sessions", "ingest"),
    ("POST", "/v1/sessions/agent:main:main/reset", "ingest"),
    ("POST", "/v1/sessions/agent:main:telegram:direct:123/fork", "ingest"),
    ("POST", "/v1/sessions/agent:main:main/compaction", "ingest"),
    ("POST", "/v1/admin/tenants", "ingest"),
    ("PUT", "/v1/agents/main/config", "ingest"),
    ("GET", "/v1/agents/main/config", "ingest"),
    ("PUT", "/v1/admin/tenants/9c62dcb2-58bd-4e16-8e04-33e2f4213aab/llm", "ingest"),
    ("GET", "/v1/admin/tenants/9c62dcb2-58bd-4e16-8e04-33e2f4213aab/llm", "ingest"),
    ("DELETE", "/v1/admin/tenants/9c62dcb2-58bd-4e16-8e04-33e2f4213aab/llm", "ingest"),
    ("GET", "/v1/admin/tenants/9c62dcb2-58bd-4e16-8e04-33e2f4213aab/usage", "ingest"),
    ("GET", "/v1/usage", "recall"),
    ("PUT", "/v1/memory/files/MEMORY.md", "ingest"),
    ("PUT", "/v1/memory/files/memory/bank/profile.md", "ingest"),
    ("DELETE", "/v1/memory/files/MEMORY.md", "ingest"),
    ("POST", "/v1/memory/daily", "ingest"),
    ("POST", "/v1/sessions/search", "recall"),
    ("POST", "/v1/memory/search", "recall"),
    ("POST", "/v1/recall", "recall"),
    ("GET", "/v1/sessions", "recall"),
    ("GET", "/v1/sessions/agent:main:main/history", "recall"),
    ("GET", "/v1/memory/files", "recall"),
    ("GET", "/v1/memory/files/memory/daily/2026-11-30.md", "recall"),
    ("GET", "/v1/memory/status", "recall"),
    ("HEAD", "/v1/memory/status", "recall"),
    ("GET", "/v1/recall/traces/019ac8e1-7a40-7000-8000-00000000000d", "recall"),
    ("GET", "/v1/recall/traces", "recall"),
]


@pytest.mark.parametrize(("method", "path", "service"), API_ROUTES)
def test_gateway_routes_by_method_and_path(method: str, path: str, service: str) -> None:
    upstream = nginx_router()(method, path)
    host, port = nginx_upstreams()[upstream]
    assert (host, port) == (service, SERVICES[service]), f"{method} {path} goes to {host}:{port}"


def test_nginx_config_is_accepted_by_nginx(tmp_path: Path) -> None:
    nginx = shutil.which("nginx")
    if nginx is None:
        pytest.skip("nginx is not installed; the config is checked by parsing above")
    text = NGINX_CONF.read_text().replace("/tmp/", f"{tmp_path}/")
    for name, (host, port) in nginx_upstreams().items():
        text = text.replace(f"server {host}:{port};", f"server 127.0.0.1:{port};", 1)
        assert f"127.0.0.1:{port}" in text, name
    (tmp_path / "nginx.conf").write_text(text)
    result = subprocess.run(
        [nginx, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr


# --------------------------------------------------------------------------------------------------
# docker-compose.yml
# --------------------------------------------------------------------------------------------------

COMPOSE_TOP_LEVEL = {"name", "services", "volumes", "networks", "secrets", "configs", "include"}
COMPOSE_SERVICE_KEYS = {
    "build", "cap_add", "cap_drop", "command", "configs", "container_name", "cpus", "depends_on",
    "deploy", "develop", "entrypoint", "env_file", "environment", "expose", "extra_hosts",
    "healthcheck", "hostname", "image", "init", "labels", "logging", "mem_limit", "networks",
    "platform", "ports", "privileged", "profiles", "pull_policy", "read_only", "restart", "secrets",
    "security_opt", "shm_size", "stdin_open", "stop_grace_period", "stop_signal", "sysctls", "tmpfs",
    "tty", "ulimits", "user", "volumes", "working_dir",
}  # fmt: skip
HEALTHCHECK_KEYS = {"test", "interval", "timeout", "retries", "start_period", "start_interval", "disable"}
DURATION = re.compile(r"^(\d+(\.\d+)?(us|ms|s|m|h))+$")
RESTART = re.compile(r"^(no|always|unless-stopped|on-failure(:\d+)?)$")
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
INTERPOLATION = re.compile(r"\$(?:(?P<escaped>\$)|\{(?P<braced>[^}]*)\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))")


@functools.cache
def _compose_raw() -> Obj:
    return load_one(COMPOSE_FILE)


def compose_variables() -> list[tuple[str, str | None]]:
    """(variable, default) for every ${...} in the file; default None when there is none."""
    found: list[tuple[str, str | None]] = []
    for match in INTERPOLATION.finditer(COMPOSE_FILE.read_text()):
        if match.group("escaped"):
            continue
        expression = match.group("braced") or match.group("bare")
        name, op, default = re.match(r"([A-Za-z_][A-Za-z0-9_]*)(:?[-?+])?(.*)", expression).groups()  # type: ignore[union-attr]
        found.append((name, default if op in {":-", "-"} else None))
    return found


def interpolate(value: str) -> str:
    def substitute(match: re.Match[str]) -> str:
        if match.group("escaped"):
            return "$"
        expression = match.group("braced") or match.group("bare")
        return expression.split(":-", 1)[1] if ":-" in expression else ""

    return INTERPOLATION.sub(substitute, value)


def compose() -> Obj:
    """The compose file with ${VAR:-default} resolved to the defaults (a run without any .env)."""
    return dict(walk_strings(_compose_raw(), interpolate))


def compose_env(service: Obj) -> dict[str, str]:
    env = service.get("environment", {})
    if isinstance(env, list):
        env = dict(item.split("=", 1) for item in env)
    return {key: str(value) for key, value in env.items()}


def check_compose_service(name: str, service: Obj, volumes: set[str]) -> None:
    unknown = {key for key in service if not key.startswith("x-")} - COMPOSE_SERVICE_KEYS
    assert unknown == set(), f"{name}: unknown compose keys {unknown}"
    assert "image" in service or "build" in service, name
    assert RESTART.match(str(service.get("restart", "no"))), f"{name}: bad restart policy"
    healthcheck = service.get("healthcheck", {})
    assert set(healthcheck) <= HEALTHCHECK_KEYS, f"{name}: unknown healthcheck keys"
    for key in ("interval", "timeout", "start_period", "start_interval"):
        assert key not in healthcheck or DURATION.match(healthcheck[key]), f"{name}: bad {key}"
    if "test" in healthcheck:
        assert healthcheck["test"][0] in {"CMD", "CMD-SHELL", "NONE"}, f"{name}: healthcheck test form"
    for mount in service.get("volumes", []):
        source = mount.split(":")[0]
        if source.startswith((".", "/")):
            assert (ROOT / source).exists(), f"{name}: bind mount source {source} does not exist"
        else:
            assert source in volumes, f"{name}: volume {source} is not declared"
    for dependency, spec in dict(service.get("depends_on", {})).items():
        assert set(spec) <= {"condition", "restart", "required"}, f"{name} -> {dependency}"
        assert spec["condition"] in CONDITIONS, f"{name} -> {dependency}: {spec['condition']}"


def test_compose_file_structure() -> None:
    raw = _compose_raw()
    assert {key for key in raw if not key.startswith("x-")} <= COMPOSE_TOP_LEVEL
    assert "version" not in raw, "`version` is obsolete in the compose spec"
    config = compose()
    volumes = set(config.get("volumes", {}))
    for name, service in config["services"].items():
        assert re.fullmatch(r"[a-zA-Z0-9._-]+", name)
        check_compose_service(name, service, volumes)
    used = {m.split(":")[0] for s in config["services"].values() for m in s.get("volumes", [])}
    assert volumes <= used, f"declared but unused volumes: {volumes - used}"


def test_compose_variables_have_dev_only_defaults() -> None:
    variables = compose_variables()
    assert variables
    for name, default in variables:
        if name in LLM_SETTINGS:  # empty is their meaning when unset: no model, no key, no overrides
            assert default is not None, f"${{{name}}} has no default: `docker compose up` would need an .env file"
            continue
        assert default, f"${{{name}}} has no default: `docker compose up` would need an .env file"
        if re.search(r"PASSWORD|TOKEN|SECRET", name):
            assert "dev-only" in default, f"{name}'s default does not look dev-only: {default!r}"


def test_compose_health_and_start_order() -> None:
    services = compose()["services"]
    for name, service in services.items():
        dependencies = dict(service.get("depends_on", {}))
        for dependency, spec in dependencies.items():
            assert dependency in services, f"{name} depends on unknown {dependency}"
            if spec["condition"] == "service_healthy":
                assert "healthcheck" in services[dependency], f"{name} waits for {dependency}'s health"
            if spec["condition"] == "service_completed_successfully":
                assert services[dependency].get("restart") == "no", f"{dependency} must be a one-shot"
        healthy_deps = [d for d, s in dependencies.items() if s["condition"] == "service_healthy"]
        one_shot = service.get("restart") == "no"
        if name in NO_HEALTHCHECK:
            assert "healthcheck" not in service
        else:
            assert "healthcheck" in service or (one_shot and healthy_deps), f"{name} has no health signal"
        assert not service.get("healthcheck", {}).get("disable"), name


def test_compose_runs_the_five_services_from_one_image() -> None:
    services = compose()["services"]
    images = {(services[n]["image"], str(services[n].get("build"))) for n in [*SERVICES, "migrate"]}
    assert len(images) == 1, f"cairn services must share one image and build: {images}"
    build_spec = services["ingest"]["build"]
    assert (ROOT / build_spec["context"] / build_spec["dockerfile"]).resolve() == DOCKERFILE
    for name, port in SERVICES.items():
        service, env = services[name], compose_env(services[name])
        assert service["command"] == [f"cairn-{name}"]
        assert env["CAIRN_HTTP_PORT"] == str(port)
        assert [str(p) for p in service["expose"]] == [str(port)], f"{name}: container port"
        assert env["OTEL_SERVICE_NAME"] == f"cairn-{name}"
        assert env["CAIRN_HTTP_HOST"] == "0.0.0.0"
        assert "ports" not in service, f"{name}: clients go through the gateway"
        assert services[name]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
        assert ("CAIRN_ADMIN_TOKEN" in env) == (name == "ingest")
        assert "CAIRN_POSTGRES_ADMIN_URL" not in env
        assert "CAIRN_POSTGRES_APP_PASSWORD" not in env
        healthcheck = " ".join(service["healthcheck"]["test"])
        assert "/readyz" in healthcheck
        assert "CAIRN_HTTP_PORT" in healthcheck
    assert services["migrate"]["command"] == ["cairn", "migrate"]


def test_compose_connection_settings_agree() -> None:
    services = compose()["services"]
    postgres = compose_env(services["postgres"])
    migrate = compose_env(services["migrate"])
    for name in SERVICES:
        env = compose_env(services[name])
        url = urlsplit(env["CAIRN_POSTGRES_URL"])
        assert (url.hostname, url.port, url.path) == ("postgres", 5432, "/" + postgres["POSTGRES_DB"])
        assert url.username == "cairn_app"
        assert url.password == migrate["CAIRN_POSTGRES_APP_PASSWORD"]
        nats, redis = urlsplit(env["CAIRN_NATS_URL"]), urlsplit(env["CAIRN_REDIS_URL"])
        assert (nats.scheme, nats.hostname, nats.port) == ("nats", "nats", 4222)
        assert (redis.scheme, redis.hostname, redis.port) == ("redis", "redis", 6379)
        otlp = urlsplit(env["OTEL_EXPORTER_OTLP_ENDPOINT"])
        assert otlp.hostname in services
        assert otlp.port in otel_receiver_ports()["http"]
        assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
        assert env["OTEL_TRACES_EXPORTER"] == "otlp"
    admin = urlsplit(migrate["CAIRN_POSTGRES_ADMIN_URL"])
    assert (admin.username, admin.password) == (postgres["POSTGRES_USER"], postgres["POSTGRES_PASSWORD"])


def test_compose_passes_the_model_settings_to_every_service() -> None:
    services = compose()["services"]
    raw = _compose_raw()["x-cairn-env"]
    for name in SERVICES:
        env = compose_env(services[name])
        assert {key: env.get(key) for key in LLM_SETTINGS} == {
            "CAIRN_LLM_BASE_URL": "",
            "CAIRN_LLM_MODEL": "",
            "CAIRN_LLM_API_KEY": "",
            "CAIRN_LLM_TIMEOUT_S": "30",
            "CAIRN_LLM_ALLOWED_HOSTS": "",
        }, name
    for key in LLM_SETTINGS:
        assert raw[key].startswith(f"${{{key}:-"), f"{key} is not taken from the operator's environment"


@pytest.mark.parametrize("which", BUILDS)
def test_k8s_passes_the_model_settings_to_every_service_with_the_key_in_a_secret(which: str) -> None:
    objects = build(which)
    containers = cairn_containers(objects)
    (config,) = {ref["configMapRef"]["name"] for c in containers.values() for ref in c.get("envFrom", [])}
    data = configmap_data(objects, config)
    assert {key for key in LLM_SETTINGS if key in data} == set(LLM_SETTINGS) - {"CAIRN_LLM_API_KEY"}
    for name in SERVICES:
        (key,) = [item for item in containers[name].get("env", []) if item["name"] == "CAIRN_LLM_API_KEY"]
        secret = key["valueFrom"]["secretKeyRef"]
        assert secret["name"].startswith("cairn-secrets")  # a generated Secret's name gets its content hash
        assert (secret["key"], secret["optional"]) == ("CAIRN_LLM_API_KEY", True)


def test_the_local_stack_passes_the_operators_model_settings_to_every_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chosen = {key: f"value of {key}" for key in LLM_SETTINGS}
    for key, value in chosen.items():
        monkeypatch.setenv(key, value)
    stack = LocalStack(tmp_path)
    stack._assign_ports()
    for name in SERVICES:
        env = stack.service_env(name)
        assert {key: env[key] for key in LLM_SETTINGS} == chosen


def test_the_local_launcher_allows_model_overrides_on_this_machine_unless_the_operator_says_otherwise(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CAIRN_LLM_ALLOWED_HOSTS", raising=False)
    stack = LocalStack(tmp_path, extra_env=local_defaults(os.environ))
    stack._assign_ports()
    for name in SERVICES:
        assert stack.service_env(name)["CAIRN_LLM_ALLOWED_HOSTS"] == "127.0.0.1,localhost"
    for chosen in ("", "llm.internal"):  # set, even empty (no overrides), the operator's value is kept
        monkeypatch.setenv("CAIRN_LLM_ALLOWED_HOSTS", chosen)
        stack = LocalStack(tmp_path, extra_env=local_defaults(os.environ))
        assert stack.service_env("ingest")["CAIRN_LLM_ALLOWED_HOSTS"] == chosen


def test_compose_dependencies_use_the_expected_images() -> None:
    services = compose()["services"]
    nats = services["nats"]
    assert nats["image"] == "nats:2.15-alpine"
    # JetStream and its store on the volume are in the mounted config (test_nats_fsyncs_every_write_...)
    assert f"./{NATS_CONF.relative_to(ROOT)}:/etc/nats/cairn.conf:ro" in nats["volumes"]
    assert nats["command"] == ["nats-server", "-c", "/etc/nats/cairn.conf"]
    postgres = services["postgres"]
    assert postgres["image"] == "pgvector/pgvector:pg18"
    # PostgreSQL 18 images refuse a volume at the pre-18 path /var/lib/postgresql/data.
    assert [m.split(":")[1] for m in postgres["volumes"]] == ["/var/lib/postgresql"]
    assert "-h" in postgres["healthcheck"]["test"], "pg_isready over TCP, not the init-time socket"
    assert services["redis"]["image"] == "redis:7-alpine"
    collector = services["otel-collector"]
    assert collector["image"].startswith("otel/opentelemetry-collector-contrib:")
    assert f"./{OTEL_CONF.relative_to(ROOT)}:/etc/otelcol-contrib/config.yaml:ro" in collector["volumes"]
    gateway = services["gateway"]
    assert gateway["image"].startswith("nginx:")
    assert f"./{NGINX_CONF.relative_to(ROOT)}:/etc/nginx/nginx.conf:ro" in gateway["volumes"]
    assert any(str(p).endswith(":8080") for p in gateway["ports"])


def test_compose_gateway_upstreams_are_the_services() -> None:
    services = compose()["services"]
    upstreams = nginx_upstreams()
    assert {host for host, _ in upstreams.values()} == {"ingest", "recall"}
    for host, port in upstreams.values():
        assert compose_env(services[host])["CAIRN_HTTP_PORT"] == str(port)
        assert services["gateway"]["depends_on"][host]["condition"] == "service_healthy"


def test_docker_compose_config_accepts_the_file() -> None:
    docker = shutil.which("docker")
    probe = subprocess.run([docker, "compose", "version"], capture_output=True, check=False) if docker else None
    if docker is None or probe is None or probe.returncode != 0:
        pytest.skip("the docker compose plugin is not installed; checked structurally above")
    result = subprocess.run(
        [docker, "compose", "-f", str(COMPOSE_FILE), "config", "--quiet"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr


# --------------------------------------------------------------------------------------------------
# OpenTelemetry collector
# --------------------------------------------------------------------------------------------------


def otel_receiver_ports() -> dict[str, set[int]]:
    protocols = load_one(OTEL_CONF)["receivers"]["otlp"]["protocols"]
    return {name: {int(spec["endpoint"].rpartition(":")[2])} for name, spec in protocols.items()}


def test_otel_collector_config() -> None:
    config = load_one(OTEL_CONF)
    assert otel_receiver_ports() == {"http": {4318}, "grpc": {4317}}
    for protocol in config["receivers"]["otlp"]["protocols"].values():
        assert protocol["endpoint"].startswith("0.0.0.0:"), "localhost is unreachable from other containers"
    assert "debug" in config["exporters"]
    pipelines = config["service"]["pipelines"]
    assert {"traces", "metrics", "logs"} <= set(pipelines)
    for name, pipeline in pipelines.items():
        for section in ("receivers", "processors", "exporters"):
            missing = set(pipeline.get(section, [])) - set(config.get(section, {}))
            assert missing == set(), f"pipeline {name} uses undefined {section}: {missing}"
    assert set(config["service"].get("extensions", [])) <= set(config.get("extensions", {}))


# --------------------------------------------------------------------------------------------------
# Dockerfile
# --------------------------------------------------------------------------------------------------


def dockerfile_instructions() -> list[tuple[str, str]]:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    lines = [line.strip() for line in text.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines if line and not line.startswith("#")
    ]


def final_stage() -> list[tuple[str, str]]:
    instructions = dockerfile_instructions()
    last_from = max(i for i, (op, _) in enumerate(instructions) if op == "FROM")
    return instructions[last_from:]


def resolve_args(value: str) -> str:
    args = dict(a.split("=", 1) for op, a in dockerfile_instructions() if op == "ARG" and "=" in a)
    return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: args.get(m.group(1) or m.group(2), m.group(0)), value)


def test_dockerfile_builds_the_workspace_with_uv() -> None:
    instructions = dockerfile_instructions()
    bases = {resolve_args(arg.split()[0]) for op, arg in instructions if op == "FROM"}
    assert bases == {"python:3.11-slim"}
    runs = " ".join(arg for op, arg in instructions if op == "RUN")
    assert re.search(r"pip install [^&;]*\buv==0\.13\.8\b", runs)
    assert re.search(r"uv sync (--[\w-]+ )*--frozen\b", runs)
    assert "--no-dev" in runs
    copied = {
        src.rstrip("/")
        for op, arg in instructions
        if op == "COPY" and not arg.startswith("--from")
        for src in arg.split()[:-1]
    }
    assert {"pyproject.toml", "uv.lock", "libs", "services", "deploy/local"} <= copied
    members = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["uv"]["workspace"]["members"]
    for pattern in members:
        for member in ROOT.glob(pattern):
            relative = member.relative_to(ROOT).as_posix()
            assert any(relative == c or relative.startswith(c + "/") for c in copied), f"{relative} not copied"


def test_image_runs_as_the_non_root_user_k8s_expects() -> None:
    users = [arg for op, arg in final_stage() if op == "USER"]
    assert users, "the final stage must switch to a non-root USER"
    uid = users[-1].split(":")[0]
    assert uid.isdigit(), "a numeric uid lets kubelet verify runAsNonRoot"
    assert int(uid) != 0
    uids = {
        tpl["spec"]["securityContext"]["runAsUser"]
        for obj, tpl in pod_templates(build("base"))
        if tpl["spec"]["containers"][0]["image"] == "cairn"
    }
    assert uids == {int(uid)}
    assert any(op in {"CMD", "ENTRYPOINT"} for op, _ in final_stage())


def test_dockerignore_keeps_the_copied_sources() -> None:
    patterns = [
        line.strip() for line in DOCKERIGNORE.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]
    for path in (
        "pyproject.toml",
        "uv.lock",
        "libs",
        "services",
        "deploy/local",
        "deploy/local/pyproject.toml",
    ):
        excluded = [p for p in patterns if not p.startswith("!") and fnmatch.fnmatch(path, p.rstrip("/"))]
        assert excluded == [], f"{path} is excluded from the build context by {excluded}"


def console_scripts() -> set[str]:
    scripts: set[str] = set()
    for pyproject in ROOT.glob("*/*/pyproject.toml"):
        scripts |= set(tomllib.loads(pyproject.read_text()).get("project", {}).get("scripts", {}))
    return scripts


def test_commands_are_console_scripts_of_the_workspace() -> None:
    commands = {str(s["command"][0]) for n, s in compose()["services"].items() if n in {*SERVICES, "migrate"}}
    commands |= {c["command"][0] for c in cairn_containers(build("base")).values()}
    assert commands == {f"cairn-{name}" for name in SERVICES} | {"cairn"}
    assert commands <= console_scripts(), f"no such console script: {commands - console_scripts()}"


def test_adapters_nats_logins_are_answered_by_ingest_with_the_key_the_server_trusts() -> None:
    """NATS auth callout in Kubernetes and compose: every configured user bypasses it, ingest logs in as the one user
    that may answer, and the issuer key the server trusts is the public half of the seed ingest signs with."""
    authorization = load_one(NATS_VALUES)["config"]["merge"]["authorization"]
    users = {u["user"] for u in authorization["users"]}
    assert set(authorization["auth_callout"]["auth_users"]) == users
    ingest = container_env(cairn_containers(build("overlays/dev"))["ingest"])
    assert urlsplit(str(ingest["CAIRN_NATS_LOGINS_URL"]["value"])).username == "cairn-logins"
    assert ingest["CAIRN_NATS_ISSUER_SEED"]["valueFrom"]["secretKeyRef"]["key"] == "CAIRN_NATS_ISSUER_SEED"
    secrets = secret_data(build("overlays/dev"), "cairn-secrets")
    assert issuer_public_key(secrets["CAIRN_NATS_ISSUER_SEED"]) == secrets["CAIRN_NATS_ISSUER"]

    services = compose()["services"]
    seed = compose_env(services["ingest"])["CAIRN_NATS_ISSUER_SEED"]
    assert issuer_public_key(seed) == compose_env(services["nats"])["CAIRN_NATS_ISSUER"]
    assert urlsplit(compose_env(services["ingest"])["CAIRN_NATS_LOGINS_URL"]).username == "cairn-logins"
