"""The deployment files (deploy/, helm/forge/) against the code they deploy.

From the sources alone: every YAML and JSON file parses; every metric, label and label value that
the Grafana dashboard and the alert rules use is one the C++ sources register, so the dashboard
cannot drift silently; every flag, FORGE_* variable and config-file key handed to a binary is in
that binary's config schema; the chart's templates read only values that values.yaml has, and
read all of them; the Dockerfiles build, stage and start binaries the build makes.
With promtool (FORGE_PROMTOOL or PATH): prometheus.yml and alerts.yml pass its checks and the
alert rules pass their unit tests (deploy/alerts_test.yml).
With the binaries built (FORGE_BUILD_DIR, default build/) and redis-server (FORGE_REDIS_SERVER or
PATH): the compose file's command lines start the real coordinator and worker, the worker
registers, and the families on their live /metrics pages are the ones the source scan found.
With helm (FORGE_HELM or PATH; scripts/setup installs a pinned one and scripts/test always sets
FORGE_HELM, so in CI these never skip): the chart lints and renders, and its config files start the
binaries the same way; rendered with TLS and tokens, its Secrets reach the paths the config files
name, its readiness probe is a grpc.health.v1 check over TLS that passes against a real
coordinator, and only the coordinator's TLS gRPC port and the /metrics ports listen on 0.0.0.0
(plaintext gRPC there is refused by the coordinator itself).
"""

import functools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CHART = ROOT / "helm" / "forge"
TEMPLATES = CHART / "templates"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "forge.json"

# Which binary each config-bearing file feeds.
CHART_CONTAINERS = {"coordinator-deployment.yaml": "forge-coordinator",
                    "worker-daemonset.yaml": "forge-worker"}
CHART_CONFIG_FILES = {"coordinator.conf": "forge-coordinator", "worker.conf": "forge-worker"}

# Labels Prometheus or the scrape configs (prometheus.yml, the chart's ServiceMonitors) add.
SCRAPE_LABELS = {"instance", "job", "node"}
# absl::StatusCodeToString's names: the values of the `code` labels.
STATUS_CODES = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
                "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL",
                "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"}


def load_yaml(path):
    with open(path) as f:
        return yaml.safe_load(f)


def source_files(suffixes, top_dirs=None):
    """Files of the repository with these suffixes, outside build trees and hidden folders."""
    tops = [ROOT / d for d in top_dirs] if top_dirs else [
        p for p in ROOT.iterdir() if p.is_dir() and not p.name.startswith(("build", "."))]
    return [p for top in tops for p in top.rglob("*") if p.suffix in suffixes or p.name in suffixes]


@functools.cache
def text_of(path):
    return path.read_text()


def tool(env_var, name):
    return os.environ.get(env_var) or shutil.which(name)


# ----- what the sources declare -----

@functools.cache
def executable_source(binary):
    """The main source file of a CMake executable target."""
    pattern = re.compile(r"add_executable\(\s*" + re.escape(binary) + r"\s+([^\s)]+)")
    for cmake in source_files({"CMakeLists.txt"}):
        found = pattern.search(cmake.read_text())
        if found:
            return cmake.parent / found.group(1)
    raise AssertionError(f"no add_executable({binary} ...) in any CMakeLists.txt")


@functools.cache
def schema_keys(binary):
    """The config keys a binary's ConfigSchema declares (common/config/config.h)."""
    text = executable_source(binary).read_text()
    declaration = r'\.(?:String|Int64|Double|Bool|Duration|Enum)\(\s*"([a-z0-9_.\-]+)"'
    keys = set(re.findall(declaration, text))
    if "AddLogOptions(" in text:  # the log.* keys every binary takes (common/logging)
        keys |= set(re.findall(declaration, (ROOT / "common/logging/logging.cc").read_text()))
    assert keys, f"{executable_source(binary)}: no ConfigSchema keys found"
    return keys


def env_name(key):
    return "FORGE_" + re.sub(r"[.\-]", "_", key.upper())


def flag_names(args):
    return [arg[2:].split("=", 1)[0] for arg in args if arg.startswith("--")]


def assert_flags_declared(binary, args, where):
    unknown = set(flag_names(args)) - schema_keys(binary)
    assert not unknown, f"{where}: {binary} declares no flag {sorted(unknown)}"


def assert_env_declared(binary, names, where):
    declared = {env_name(key) for key in schema_keys(binary)}
    unknown = {n for n in names if n.startswith("FORGE_")} - declared
    assert not unknown, f"{where}: {binary} reads no variable {sorted(unknown)}"


@functools.cache
def arch_names():
    return set(re.findall(r'\.name = "([^"]+)"', (ROOT / "common/arch/arch.cc").read_text()))


class Family:
    def __init__(self, name, kind, path):
        self.name, self.kind, self.path = name, kind, path

    @functools.cached_property
    def labels(self):
        # Label pairs are written {"name", value} where the family's children are added.
        own = set(re.findall(r'\{\s*"([a-z_]+)"\s*,', text_of(self.path)))
        return own | SCRAPE_LABELS | ({"le"} if self.kind == "histogram" else set())

    def has_value(self, label, value):
        """Whether a label value can come from the sources: a literal in the registering
        file's folder, an enum value of the protocol, or a status code name."""
        if label == "code" and value in STATUS_CODES:
            return True
        quoted = f'"{value}"'
        if any(quoted in text_of(p) for p in self.path.parent.glob("*.cc")
               if not p.name.endswith("_test.cc")):
            return True
        enum_value = re.compile(r"\b[A-Z][A-Z0-9_]*_" + re.escape(value.upper()) + r"\s*=")
        return any(enum_value.search(text_of(p)) for p in (ROOT / "proto").rglob("*.proto"))


@functools.cache
def registered_families():
    """forge_* metric families registered by the C++ sources, by name."""
    families = {}
    registration = re.compile(r'Add(Counter|Gauge|Histogram)\(\s*\{\s*"(forge_[a-z0-9_]+)"')
    for path in source_files({".cc"}, ("server", "worker", "common")):
        if path.name.endswith("_test.cc"):
            continue
        for kind, name in registration.findall(path.read_text()):
            families[name] = Family(name, kind.lower(), path)
    assert "forge_coordinator_jobs" in families, "the registration scan found nothing"
    return families


def family_of(sample_name):
    families = registered_families()
    if sample_name in families:
        return families[sample_name]
    for suffix in ("_bucket", "_sum", "_count"):
        base = sample_name.removesuffix(suffix)
        if base != sample_name and base in families and families[base].kind == "histogram":
            return families[base]
    return None


# ----- what the dashboard and the alerts use -----

METRIC = re.compile(r"\b(forge_[a-z0-9_]+)\b(?:\s*\{([^}]*)\})?")
MATCHER = re.compile(r'([a-zA-Z_]\w*)\s*(=~|!~|!=|=)\s*"([^"]*)"')
GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
LEGEND_LABEL = re.compile(r"\{\{\s*([a-zA-Z_]\w*)\s*\}\}")


def dashboard_panels(panels):
    for panel in panels:
        yield panel
        yield from dashboard_panels(panel.get("panels", []))


def dashboard_queries():
    """(where, PromQL, legend format) of every dashboard query."""
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard_panels(dashboard["panels"]):
        for target in panel.get("targets", []):
            yield f"panel {panel['title']!r}", target["expr"], target.get("legendFormat", "")
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            metric, label = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)",
                                         variable["definition"]).groups()
            yield f"variable ${variable['name']}", f"max by ({label}) ({metric})", ""


def alert_queries():
    for group in load_yaml(DEPLOY / "alerts.yml")["groups"]:
        for rule in group["rules"]:
            yield f"alert {rule['alert']}", rule["expr"], ""


def query_problems(where, expr, legend):
    problems = []
    uses = METRIC.findall(expr)
    if not uses:
        return [f"{where}: uses no forge_ metric: {expr}"]
    grouping = {label.strip() for clause in GROUPING.findall(expr)
                for label in clause.split(",") if label.strip()}
    families = []
    for sample_name, matchers in uses:
        family = family_of(sample_name)
        if family is None:
            problems.append(
                f"{where}: {sample_name} is registered nowhere in server/ worker/ common/")
            continue
        families.append(family)
        for label, _, value in MATCHER.findall(matchers):
            if label not in family.labels:
                problems.append(f"{where}: {family.name} has no label {label!r}")
            elif "$" not in value and value != ".*":
                for alternative in value.split("|"):
                    if not family.has_value(label, alternative):
                        problems.append(f"{where}: {family.name}{{{label}={alternative!r}}} "
                                        f"is never produced by {family.path.relative_to(ROOT)}")
    for family in families:
        for label in grouping - family.labels:
            problems.append(f"{where}: groups by {label!r}, which {family.name} lacks")
    # A legend can show what the grouping keeps, or, without one, what every series has.
    available = grouping or (set.intersection(*(f.labels for f in families)) if families else set())
    for label in set(LEGEND_LABEL.findall(legend)) - available:
        problems.append(f"{where}: legend shows {{{{{label}}}}}, which the query does not keep")
    return problems


def test_dashboard_and_alerts_use_only_metrics_the_sources_export():
    queries = list(dashboard_queries()) + list(alert_queries())
    assert len(queries) > 20
    problems = [p for query in queries for p in query_problems(*query)]
    assert not problems, "\n".join(problems)


def test_the_metric_check_catches_drift():
    assert query_problems("q", 'rate(forge_coordinator_candidate_total[5m])', "")
    assert query_problems("q", 'rate(forge_coordinator_candidates_total{evnt="failed"}[5m])', "")
    assert query_problems("q", 'rate(forge_coordinator_candidates_total{event="fialed"}[5m])', "")
    assert query_problems("q", 'sum by (method) (rate(forge_worker_rpc_errors_total[5m]))', "")
    assert query_problems("q", 'sum by (rpc) (rate(forge_worker_rpc_errors_total[5m]))', "{{code}}")
    assert query_problems("q", 'forge_worker_leases_active_bucket', "")
    assert not query_problems(
        "q", 'sum by (rpc, code) (rate(forge_worker_rpc_errors_total{code!="OK"}[5m]))', "{{rpc}}")


def test_dashboard_panels_are_well_formed():
    dashboard = json.loads(DASHBOARD.read_text())
    panels = list(dashboard_panels(dashboard["panels"]))
    assert len({p["id"] for p in panels}) == len(panels), "panel ids repeat"
    datasource_variables = [v["name"] for v in dashboard["templating"]["list"]
                            if v["type"] == "datasource"]
    for panel in panels:
        assert panel["targets"], f"panel {panel['title']!r} has no query"
        for target in [panel] + panel["targets"]:
            uid = target["datasource"]["uid"]
            assert uid.strip("${}") in datasource_variables, \
                f"panel {panel['title']!r}: data source {uid} is not the dashboard's variable"
    titles = " ".join(p["title"].lower() for p in panels)
    for subject in ("candidates/hour", "cache hit ratio", "failures by stage", "live workers",
                    "frontier", "jobs by state", "gpu busy fraction", "p50", "lease expiries",
                    "rpc error rate"):
        assert subject in titles, f"the dashboard has no panel about {subject}"


# ----- parsing, and promtool -----

def test_every_yaml_and_json_file_parses():
    files = [p for base in (DEPLOY, CHART) for p in base.rglob("*")
             if p.suffix in {".yml", ".yaml", ".json"} and TEMPLATES not in p.parents]
    assert len(files) >= 8
    for path in files:
        if path.suffix == ".json":
            json.loads(path.read_text())
        else:
            assert load_yaml(path) is not None, f"{path} is empty"


def promtool_or_skip():
    promtool = tool("FORGE_PROMTOOL", "promtool")
    if not promtool:
        pytest.skip("promtool not found (set FORGE_PROMTOOL or install Debian's prometheus)")
    return promtool


@pytest.mark.parametrize("args", [["check", "config", "prometheus.yml"],
                                  ["check", "rules", "alerts.yml"],
                                  ["test", "rules", "alerts_test.yml"]],
                         ids=["check-config", "check-rules", "test-rules"])
def test_promtool(args):
    result = subprocess.run([promtool_or_skip(), *args], cwd=DEPLOY, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_has_a_unit_test():
    alerts = {rule["alert"] for group in load_yaml(DEPLOY / "alerts.yml")["groups"]
              for rule in group["rules"]}
    tested = {case["alertname"] for test in load_yaml(DEPLOY / "alerts_test.yml")["tests"]
              for case in test["alert_rule_test"] if case["exp_alerts"]}
    assert alerts == tested, f"alerts never shown firing in alerts_test.yml: {alerts - tested}"


# ----- Dockerfiles and the compose file -----

def dockerfile_instructions(path):
    """(instruction, arguments) pairs, continuation lines joined, comments dropped."""
    lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
    text = re.sub(r"\\\n", " ", "\n".join(lines))
    return [tuple(line.strip().split(None, 1)) for line in text.splitlines() if line.strip()]


def dockerfile_entrypoint(path):
    entrypoints = [json.loads(args) for op, args in dockerfile_instructions(path)
                   if op == "ENTRYPOINT"]
    assert entrypoints, f"{path.name}: no ENTRYPOINT"
    return Path(entrypoints[-1][0]).name


def compose_services():
    return load_yaml(DEPLOY / "docker-compose.yml")["services"]


def forge_services():
    """Compose services built from a Forge Dockerfile: name -> (service, Dockerfile, binary)."""
    found = {}
    for name, service in compose_services().items():
        if "build" in service:
            dockerfile = (DEPLOY / service["build"]["context"] / service["build"]["dockerfile"])
            assert dockerfile.is_file(), f"compose service {name}: no {dockerfile}"
            found[name] = (service, dockerfile, dockerfile_entrypoint(dockerfile))
    assert {binary for _, _, binary in found.values()} == {"forge-coordinator", "forge-worker"}
    return found


@pytest.mark.parametrize("dockerfile", ["Dockerfile.coordinator", "Dockerfile.worker"])
def test_dockerfile_builds_stages_and_starts_real_targets(dockerfile):
    path = DEPLOY / dockerfile
    instructions = dockerfile_instructions(path)
    staged = []
    for op, args in instructions:
        if op == "COPY" and not args.startswith("--from"):
            for source in args.split()[:-1]:
                assert (ROOT / source).exists(), f"{dockerfile}: COPY of missing {source}"
        if op == "RUN":
            for targets in re.findall(r"scripts/build ([^&|;]+)", args):
                for target in targets.split():
                    executable_source(target)
            for built in re.findall(r"\bbuild/(\S+)", args):
                built = Path(built)
                cmake = (ROOT / built.parent / "CMakeLists.txt").read_text()
                assert re.search(r"add_executable\(\s*" + re.escape(built.name) + r"\s", cmake), \
                    f"{dockerfile}: scripts/build puts no {built.name} in build/{built.parent}"
                staged.append(built.name)
    binary = dockerfile_entrypoint(path)
    assert binary in staged, f"{dockerfile}: starts {binary}, which it never stages"
    for op, args in instructions:
        if op == "CMD":
            assert_flags_declared(binary, json.loads(args), f"{dockerfile} CMD")
    assert (DEPLOY / f"{dockerfile}.dockerignore").is_file()


def test_compose_gives_the_binaries_only_settings_they_declare():
    for name, (service, _, binary) in forge_services().items():
        assert_flags_declared(binary, service.get("command", []), f"compose service {name}")
        assert_env_declared(binary, service.get("environment", {}), f"compose service {name}")
        for arg in service.get("command", []):
            if arg.startswith("--emulate="):
                assert arg.split("=", 1)[1] in arch_names(), f"{arg}: not in common/arch"


def test_prometheus_scrapes_the_ports_compose_serves_metrics_on():
    services = compose_services()
    targets = [target for job in load_yaml(DEPLOY / "prometheus.yml")["scrape_configs"]
               for static in job["static_configs"] for target in static["targets"]]
    assert len(targets) == 2
    for target in targets:
        host, port = target.rsplit(":", 1)
        command = " ".join(services[host]["command"])
        served = re.findall(r"--metrics[.\-](?:listen|port)=(?:\S*:)?(\d+)", command)
        assert served == [port], f"prometheus.yml scrapes {target}; {host} serves {served}"


def test_compose_mounts_exist_and_grafana_finds_its_provisioning():
    mounts = {}
    for name, service in compose_services().items():
        for volume in service.get("volumes", []):
            source, target = volume.split(":")[:2]
            if source.startswith("."):
                assert (DEPLOY / source).exists(), f"compose service {name} mounts missing {source}"
                mounts[target] = DEPLOY / source

    def host_path(container_path):
        for target, source in mounts.items():
            if container_path == target or container_path.startswith(target + "/"):
                return source / os.path.relpath(container_path, target)
        raise AssertionError(f"{container_path} is not mounted from deploy/")

    provider = load_yaml(DEPLOY / "grafana/provisioning/dashboards/forge.yml")["providers"][0]
    assert host_path(provider["options"]["path"]).resolve() == DASHBOARD.parent.resolve()
    home = compose_services()["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert host_path(home).resolve() == DASHBOARD.resolve()
    datasource = load_yaml(DEPLOY / "grafana/provisioning/datasources/prometheus.yml")
    host, port = re.fullmatch(r"http://([\w-]+):(\d+)", datasource["datasources"][0]["url"]).groups()
    published = [mapping.split(":")[-1] for mapping in compose_services()[host]["ports"]]
    assert port in published, f"Grafana's data source is {host}:{port}; {host} listens on {published}"


# ----- the Helm chart -----

def template_texts():
    return {p.name: p.read_text() for p in TEMPLATES.iterdir() if p.is_file()}


def values_paths(node, prefix=()):
    """Paths of the leaves of values.yaml (an empty map or any list is a leaf)."""
    if isinstance(node, dict) and node:
        for key, child in node.items():
            yield from values_paths(child, prefix + (key,))
    else:
        yield prefix


def test_chart_templates_read_exactly_the_values_values_yaml_has():
    values = load_yaml(CHART / "values.yaml")
    read = {tuple(ref.strip(".").split("."))
            for text in template_texts().values()
            for ref in re.findall(r"\.Values((?:\.[A-Za-z_]\w*)+)", text)}
    assert read
    for path in read:
        node = values
        for key in path:
            assert isinstance(node, dict) and key in node, \
                f"templates read .Values.{'.'.join(path)}, which values.yaml lacks"
            node = node[key]
    unread = [".".join(leaf) for leaf in values_paths(values)
              if not any(leaf[:len(path)] == path for path in read)]
    assert not unread, f"values.yaml entries no template reads: {unread}"


def chart_config_blocks():
    """Keys the configmap template writes into each config file, by file name."""
    blocks, current = {}, None
    for line in template_texts()["configmap.yaml"].splitlines():
        header = re.fullmatch(r"  ([\w.]+\.conf): \|", line)
        if header:
            current = blocks.setdefault(header.group(1), [])
        elif current is not None and line.startswith("    "):
            key = re.match(r"\s+([a-z][a-z0-9_.\-]*)\s*=", line)
            if key:
                current.append(key.group(1))
    return blocks


def test_chart_gives_the_binaries_only_settings_they_declare():
    values = load_yaml(CHART / "values.yaml")
    blocks = chart_config_blocks()
    assert set(blocks) == set(CHART_CONFIG_FILES)
    for file_name, binary in CHART_CONFIG_FILES.items():
        component = binary.removeprefix("forge-")
        fixed = blocks[file_name]
        configurable = list(values[component]["config"])
        for key in fixed + configurable:
            assert key in schema_keys(binary), f"{file_name}: {binary} declares no key {key!r}"
        assert not set(fixed) & set(configurable), \
            f"{file_name}: {set(fixed) & set(configurable)} set by the chart and by values.yaml"
    for template, binary in CHART_CONTAINERS.items():
        text = template_texts()[template]
        assert_flags_declared(binary, re.findall(r'"(--[a-z][^"]*)"', text), template)
        assert_env_declared(binary, re.findall(r"- name: (FORGE_\w+)", text), template)
    if values["worker"]["emulate"]:
        assert values["worker"]["emulate"] in arch_names()


def test_chart_version_and_linked_files_follow_the_project():
    chart = load_yaml(CHART / "Chart.yaml")
    project = re.search(r"project\(forge VERSION ([\d.]+)", (ROOT / "CMakeLists.txt").read_text())
    assert chart["appVersion"] == project.group(1)
    # The PrometheusRule and the dashboard ConfigMap carry deploy/'s files, not copies.
    assert (CHART / "files/alerts.yml").resolve() == (DEPLOY / "alerts.yml").resolve()
    assert (CHART / "files/forge-dashboard.json").resolve() == DASHBOARD.resolve()
    for linked in ("files/alerts.yml", "files/forge-dashboard.json"):
        assert f'"{linked}"' in "".join(template_texts().values()), f"no template reads {linked}"


def helm_or_skip():
    helm = tool("FORGE_HELM", "helm")
    if not helm:
        pytest.skip("helm not found (set FORGE_HELM): `helm lint` and `helm template` not run")
    # FORGE_HELM names the one scripts/setup installs: missing is a broken set-up, not a skip.
    assert Path(helm).is_file(), f"FORGE_HELM={helm} does not exist (run scripts/setup)"
    return helm


ALL_OPTIONS = ["--set", "metrics.serviceMonitor.enabled=true",
               "--set", "metrics.prometheusRule.enabled=true",
               "--set", "metrics.grafanaDashboard.enabled=true",
               "--set", "redis.auth.enabled=true", "--set", "redis.auth.password=test",
               "--set", "worker.emulate=H200",
               "--set", "coordinator.blobs.persistence.enabled=false",
               "--set", "security.tlsSecret=forge-tls", "--set", "security.tokensSecret=forge-tokens",
               "--set", "security.workerTokenSecret=forge-worker-token"]


def helm_template(helm, *args):
    result = subprocess.run([helm, "template", "forge", str(CHART), *args],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@pytest.mark.parametrize("options", [[], ALL_OPTIONS], ids=["defaults", "all-options"])
def test_chart_lints_and_renders(options):
    helm = helm_or_skip()
    lint = subprocess.run([helm, "lint", "--strict", str(CHART), *options],
                          capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    documents = helm_template(helm, *options)
    kinds = {doc["kind"] for doc in documents}
    assert {"Deployment", "DaemonSet", "StatefulSet", "ConfigMap", "PodDisruptionBudget"} <= kinds
    for doc in documents:
        assert doc["apiVersion"] and doc["metadata"]["name"], doc
    if options:
        rule = next(doc for doc in documents if doc["kind"] == "PrometheusRule")
        assert rule["spec"] == load_yaml(DEPLOY / "alerts.yml")
        assert {"ServiceMonitor", "Secret"} <= kinds


# ----- the real binaries with the compose and chart settings -----

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch_metrics(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as response:
            return response.read().decode()
    except OSError:
        return ""


def binaries_or_skip():
    build = Path(os.environ.get("FORGE_BUILD_DIR", ROOT / "build"))
    binaries = {name: build / executable_source(name).parent.relative_to(ROOT) / name
                for name in ("forge-coordinator", "forge-worker")}
    for path in binaries.values():
        if not path.is_file():
            pytest.skip(f"{path} not built (scripts/build)")
    redis_server = tool("FORGE_REDIS_SERVER", "redis-server")
    if not redis_server:
        pytest.skip("redis-server not found (set FORGE_REDIS_SERVER)")
    return binaries, redis_server


class Stack:
    """redis-server, forge-coordinator and forge-worker on loopback, started with the given
    arguments plus overrides that only move ports and folders (a later flag wins)."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.processes = []

    def start(self, name, argv, env=None):
        log = self.tmp / f"{name}.log"
        with open(log, "w") as out:
            process = subprocess.Popen([str(a) for a in argv], stdout=out, stderr=subprocess.STDOUT,
                                       env={**os.environ, **(env or {})})
        self.processes.append((process, log))
        return log

    def wait_for(self, condition, what, timeout=30):
        """condition()'s first true value; fails with the logs once a process has exited."""
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            exited = [log.stem for process, log in self.processes if process.poll() is not None]
            if exited or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        reason = f"{', '.join(exited)} exited" if exited else f"timed out after {timeout} s"
        logs = "\n".join(f"--- {log.name}:\n{log.read_text()[-3000:]}" for _, log in self.processes)
        raise AssertionError(f"waiting for {what}: {reason}\n{logs}")

    def run(self, binaries, redis_server, redis_args, coordinator_args, worker_args, worker_env):
        redis_port = free_port()
        self.start("redis", [redis_server, *redis_args, "--port", redis_port,
                             "--bind", "127.0.0.1", "--dir", self.tmp, "--save", ""])
        self.wait_for(lambda: self.accepts(redis_port), "redis-server")
        coordinator_log = self.start("coordinator", [
            binaries["forge-coordinator"], *coordinator_args, "--listen=127.0.0.1:0",
            "--metrics.listen=127.0.0.1:0", "--redis.host=127.0.0.1", f"--redis.port={redis_port}",
            f"--blobs.dir={self.tmp / 'blobs'}"])

        def announced_ports():
            # "forge-coordinator listening on HOST:PORT", then "... metrics on HOST:PORT".
            ports = re.findall(r"(?:listening|metrics) on 127\.0\.0\.1:(\d+)",
                               coordinator_log.read_text())
            return ports if len(ports) == 2 else None

        grpc_port, coordinator_metrics_port = self.wait_for(announced_ports,
                                                            "the coordinator's ports")
        worker_metrics_port = free_port()
        worker_log = self.start("worker", [
            binaries["forge-worker"], *worker_args, f"--coordinator=127.0.0.1:{grpc_port}",
            "--metrics.host=127.0.0.1", f"--metrics.port={worker_metrics_port}",
            f"--compile-cache-dir={self.tmp / 'cubins'}"], env=worker_env)

        def metrics_with_the_worker_live():
            text = fetch_metrics(coordinator_metrics_port)
            return text if 'forge_coordinator_state{what="live_workers"} 1' in text else None

        coordinator_metrics = self.wait_for(metrics_with_the_worker_live, "the worker to register")
        worker_metrics = self.wait_for(lambda: fetch_metrics(worker_metrics_port),
                                       "the worker's /metrics")
        return coordinator_metrics, worker_metrics, worker_log

    @staticmethod
    def accepts(port):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            return False

    def stop(self):
        for process, _ in reversed(self.processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def assert_live_families_are_the_scanned_ones(*pages):
    live = {}
    for page in pages:
        live.update(re.findall(r"^# TYPE (\S+) (\S+)$", page, re.MULTILINE))
    assert live
    for name, kind in live.items():
        family = registered_families().get(name)
        assert family is not None, f"/metrics serves {name}, which the source scan missed"
        assert family.kind == kind, f"{name}: scanned as {family.kind}, served as {kind}"


def run_stack(tmp_path, coordinator_args, worker_args, worker_env, expected_worker_id):
    binaries, redis_server = binaries_or_skip()
    redis_args = compose_services()["redis"]["command"][1:]
    stack = Stack(tmp_path)
    try:
        coordinator_metrics, worker_metrics, worker_log = stack.run(
            binaries, redis_server, redis_args, coordinator_args, worker_args, worker_env)
    finally:
        stack.stop()
    assert_live_families_are_the_scanned_ones(coordinator_metrics, worker_metrics)
    registered = [line for line in worker_log.read_text().splitlines() if "registered" in line]
    assert registered and expected_worker_id in registered[0], worker_log.read_text()


def test_compose_command_lines_start_the_real_stack(tmp_path):
    services = forge_services()
    by_binary = {binary: service for service, _, binary in services.values()}
    worker_args = by_binary["forge-worker"]["command"]
    worker_id = next(a.split("=", 1)[1] for a in worker_args if a.startswith("--worker-id="))
    run_stack(tmp_path, by_binary["forge-coordinator"]["command"], worker_args, {}, worker_id)


def test_chart_config_files_start_the_real_stack(tmp_path):
    helm = helm_or_skip()
    documents = helm_template(helm, "--set", "worker.emulate=H200", "--set", "worker.gpusPerNode=2")
    config = next(doc for doc in documents if doc["kind"] == "ConfigMap"
                  and "coordinator.conf" in doc["data"])["data"]
    for name, text in config.items():
        (tmp_path / name).write_text(text)
    # What the DaemonSet's downward API gives the worker.
    node_env = {"FORGE_WORKER_ID": "gpu-node-17", "FORGE_HOSTNAME": "gpu-node-17"}
    run_stack(tmp_path, [f"--config={tmp_path / 'coordinator.conf'}"],
              [f"--config={tmp_path / 'worker.conf'}"], node_env, "gpu-node-17")


# ----- the chart with TLS and tokens -----

SECURE_VALUES = {"security.tlsSecret": "forge-tls", "security.tokensSecret": "forge-tokens",
                 "security.tokenSigningSecret": "forge-token-secret",
                 "security.workerTokenSecret": "forge-worker-token",
                 "redis.auth.enabled": "true", "redis.auth.password": "redis-test-password"}


def set_flags(values):
    return [flag for key, value in values.items() for flag in ("--set", f"{key}={value}")]


def config_lines(text):
    """A common/config file's `key = value` lines as a dict (values unquoted)."""
    entries = {}
    for line in text.splitlines():
        if "=" in line and not line.lstrip().startswith("#"):
            key, value = (part.strip() for part in line.split("=", 1))
            entries[key] = value.strip('"')
    return entries


def rendered(helm, values):
    documents = helm_template(helm, *set_flags(values))
    by_kind = {}
    for doc in documents:
        by_kind.setdefault(doc["kind"], []).append(doc)
    config = next(doc for doc in by_kind["ConfigMap"] if "coordinator.conf" in doc["data"])["data"]
    return by_kind, {name: config_lines(text) for name, text in config.items()}


def pod_of(by_kind, kind, component):
    workload = next(doc for doc in by_kind[kind]
                    if doc["metadata"]["labels"]["app.kubernetes.io/component"] == component)
    return workload["spec"]["template"]["spec"]


def mounted_file(pod, container, path):
    """(Secret name, key) of the file at `path` in the container's mounts, or None."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        prefix = mount["mountPath"].rstrip("/") + "/"
        if not path.startswith(prefix):
            continue
        secret = volumes[mount["name"]].get("secret")
        if secret is None:
            return None
        name = path[len(prefix):]
        items = {item["path"]: item["key"] for item in secret.get("items", [])}
        if items and name not in items:
            return None
        return secret["secretName"], items.get(name, name)
    return None


def secret_env(container, name):
    for variable in container.get("env", []):
        if variable["name"] == name:
            ref = variable.get("valueFrom", {}).get("secretKeyRef")
            return (ref["name"], ref["key"]) if ref else None
    return None


def test_chart_with_tls_and_tokens_mounts_each_secret_where_the_config_reads_it():
    helm = helm_or_skip()
    lint = subprocess.run([helm, "lint", "--strict", str(CHART), *set_flags(SECURE_VALUES)],
                          capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    by_kind, conf = rendered(helm, SECURE_VALUES)
    coordinator_pod = pod_of(by_kind, "Deployment", "coordinator")
    [coordinator] = coordinator_pod["containers"]
    coordinator_conf = conf["coordinator.conf"]
    assert mounted_file(coordinator_pod, coordinator, coordinator_conf["tls.cert"]) == (
        "forge-tls", "tls.crt")
    assert mounted_file(coordinator_pod, coordinator, coordinator_conf["tls.key"]) == (
        "forge-tls", "tls.key")
    assert mounted_file(coordinator_pod, coordinator, coordinator_conf["auth.tokens"]) == (
        "forge-tokens", "tokens")
    assert mounted_file(coordinator_pod, coordinator, coordinator_conf["auth.token-secret"]) == (
        "forge-token-secret", "secret")
    assert "insecure" not in coordinator_conf
    assert secret_env(coordinator, "FORGE_REDIS_PASSWORD") == ("forge-redis", "redis-password")

    # The worker: TLS with only the CA (never the coordinator's key), its token from its Secret.
    worker_pod = pod_of(by_kind, "DaemonSet", "worker")
    [worker] = worker_pod["containers"]
    worker_conf = conf["worker.conf"]
    assert worker_conf["tls"] == "true"
    assert mounted_file(worker_pod, worker, worker_conf["tls-ca"]) == ("forge-tls", "ca.crt")
    assert secret_env(worker, "FORGE_TOKEN") == ("forge-worker-token", "token")
    worker_secret_keys = {item["key"] for v in worker_pod["volumes"] if "secret" in v
                          for item in v["secret"].get("items", [])}
    assert worker_secret_keys == {"ca.crt"}, "the worker mounts more of a Secret than the CA"

    # The only Secret the chart makes is Redis's password; no secret text is in the ConfigMap.
    [redis_secret] = by_kind["Secret"]
    assert redis_secret["metadata"]["name"] == "forge-redis"
    config_text = json.dumps(conf)
    assert "redis-test-password" not in config_text
    redis_args = pod_of(by_kind, "StatefulSet", "redis")["containers"][0]["args"]
    assert "--requirepass" in redis_args


def test_chart_probes_are_grpc_health_checks_over_tls_naming_the_service():
    helm = helm_or_skip()
    by_kind, conf = rendered(helm, SECURE_VALUES)
    coordinator_pod = pod_of(by_kind, "Deployment", "coordinator")
    [coordinator] = coordinator_pod["containers"]
    probe = coordinator["readinessProbe"]["exec"]["command"]
    assert Path(probe[0]).name == "forge-coordinator"
    flags = dict(arg[2:].split("=", 1) for arg in probe[1:])
    assert set(flags) == {"probe", "probe.ca", "probe.server-name"}
    assert_flags_declared("forge-coordinator", probe[1:], "readinessProbe")
    grpc_port = next(p["containerPort"] for p in coordinator["ports"] if p["name"] == "grpc")
    assert flags["probe"] == f"127.0.0.1:{grpc_port}"
    assert mounted_file(coordinator_pod, coordinator, flags["probe.ca"]) == ("forge-tls", "ca.crt")
    # The name the probe checks the certificate for is the Service's, the address workers dial.
    service = next(doc for doc in by_kind["Service"]
                   if doc["metadata"]["labels"]["app.kubernetes.io/component"] == "coordinator")
    assert flags["probe.server-name"] == service["metadata"]["name"]
    assert conf["worker.conf"]["coordinator"].split(":")[0] == service["metadata"]["name"]
    assert coordinator["startupProbe"]["tcpSocket"]["port"] == "grpc"
    assert coordinator["livenessProbe"]["httpGet"]["port"] == "metrics"


def make_certificates(directory, server_name):
    """A CA and a server certificate it signs for `server_name` and 127.0.0.1 (openssl CLI)."""
    (directory / "san.ext").write_text(f"subjectAltName=DNS:{server_name},IP:127.0.0.1\n")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    for argv in (["req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-days", "1",
                  "-subj", "/CN=forge-test-ca"],
                 ["req", *ec, "-keyout", "tls.key", "-out", "tls.csr", "-subj", f"/CN={server_name}"],
                 ["x509", "-req", "-in", "tls.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                  "-CAcreateserial", "-out", "tls.crt", "-days", "1", "-extfile", "san.ext"]):
        result = subprocess.run(["openssl", *argv], cwd=directory, capture_output=True, text=True,
                                timeout=60)
        assert result.returncode == 0, result.stderr


def test_chart_readiness_probe_passes_against_the_real_coordinator_over_tls(tmp_path):
    helm = helm_or_skip()
    binaries, redis_server = binaries_or_skip()
    if not shutil.which("openssl"):
        pytest.skip("openssl not found")
    by_kind, _ = rendered(helm, SECURE_VALUES)
    config = next(doc for doc in by_kind["ConfigMap"] if "coordinator.conf" in doc["data"])["data"]
    (tmp_path / "coordinator.conf").write_text(config["coordinator.conf"])
    [coordinator] = pod_of(by_kind, "Deployment", "coordinator")["containers"]
    probe = coordinator["readinessProbe"]["exec"]["command"]
    server_name = dict(arg[2:].split("=", 1) for arg in probe[1:])["probe.server-name"]
    make_certificates(tmp_path, server_name)
    (tmp_path / "tokens").write_text("probe-test-admin-token-01 root admin\n")
    (tmp_path / "secret").write_text("0123456789abcdef0123456789abcdef0123456789abcdef\n")

    stack = Stack(tmp_path)
    try:
        redis_port = free_port()
        stack.start("redis", [redis_server, "--port", redis_port, "--bind", "127.0.0.1",
                              "--dir", tmp_path, "--save", "", "--appendonly", "no"])
        stack.wait_for(lambda: stack.accepts(redis_port), "redis-server")
        # The rendered file, with what lives elsewhere in a pod moved here (a later flag wins),
        # and loopback instead of the pod's 0.0.0.0.
        log = stack.start("coordinator", [
            binaries["forge-coordinator"], f"--config={tmp_path / 'coordinator.conf'}",
            "--listen=127.0.0.1:0", "--metrics.listen=127.0.0.1:0", "--redis.host=127.0.0.1",
            f"--redis.port={redis_port}", "--redis.password=", f"--blobs.dir={tmp_path / 'blobs'}",
            f"--tls.cert={tmp_path / 'tls.crt'}", f"--tls.key={tmp_path / 'tls.key'}",
            f"--auth.tokens={tmp_path / 'tokens'}", f"--auth.token-secret={tmp_path / 'secret'}"])
        port = stack.wait_for(
            lambda: re.search(r"listening on 127\.0\.0\.1:(\d+)", log.read_text()), "the port"
        ).group(1)
        assert "authentication on" in log.read_text()

        # The probe's command with this test's port and CA file in place of the pod's.
        moved = {"probe": f"127.0.0.1:{port}", "probe.ca": str(tmp_path / "ca.crt")}

        def run_probe(argv):
            flags = [arg[2:].split("=", 1) for arg in argv[1:]]
            argv = [str(binaries["forge-coordinator"])] + [
                f"--{key}={moved.get(key, value)}" for key, value in flags]
            return subprocess.run(argv, capture_output=True, text=True, timeout=30)

        passed = stack.wait_for(lambda: run_probe(probe).returncode == 0 or None,
                                "the readiness probe to pass", timeout=20)
        assert passed
        # Without the CA the probe speaks plaintext to the TLS port: not ready.
        plaintext = run_probe([a for a in probe if not a.startswith("--probe.ca=")])
        assert plaintext.returncode != 0
        wrong_name = run_probe([a if not a.startswith("--probe.server-name=")
                                else "--probe.server-name=someone-else" for a in probe])
        assert wrong_name.returncode != 0, "the certificate's name is checked"
    finally:
        stack.stop()


def listen_addresses(by_kind, conf):
    """(where, key, address) of every address a rendered binary is told to listen on: the config
    files' *listen and *host keys and the containers' --*listen / --*host / --bind arguments."""
    found = []
    for name, entries in conf.items():
        for key, value in entries.items():
            if key.endswith(("listen", ".host")) and key != "redis.host":
                found.append((name, key, value))
    for kind in ("Deployment", "DaemonSet", "StatefulSet"):
        for doc in by_kind.get(kind, []):
            for container in doc["spec"]["template"]["spec"]["containers"]:
                argv = container.get("args", []) + container.get("command", [])
                for i, arg in enumerate(argv):
                    flag = arg.split("=", 1)[0]
                    if flag.endswith(("listen", "-host", ".host")) or flag == "--bind":
                        value = arg.split("=", 1)[1] if "=" in arg else argv[i + 1]
                        found.append((container["name"], flag, value))
    return found


@pytest.mark.parametrize("values", [SECURE_VALUES, {}], ids=["tls-and-tokens", "defaults"])
def test_chart_listens_on_all_interfaces_only_where_expected(values):
    helm = helm_or_skip()
    by_kind, conf = rendered(helm, values)
    wildcard = {(where, key) for where, key, address in listen_addresses(by_kind, conf)
                if address.startswith(("0.0.0.0", "[::]", "*"))}
    # A pod's ports must be reachable from the pod network: the coordinator's gRPC and both
    # /metrics pages (the worker's by forge-worker's own default, metrics.host 0.0.0.0).
    assert wildcard == {("coordinator.conf", "listen"), ("coordinator.conf", "metrics.listen")}
    coordinator_conf = conf["coordinator.conf"]
    if values:
        assert coordinator_conf.get("tls.cert"), "gRPC on 0.0.0.0 without TLS"
    else:
        # No TLS Secret and no security.insecure: the file asks for plaintext on 0.0.0.0, which
        # the coordinator refuses (checked for real below).
        assert "tls.cert" not in coordinator_conf and "insecure" not in coordinator_conf
    # Redis binds the pod's interfaces; a NetworkPolicy admits only the coordinator to it.
    policy = next(doc for doc in by_kind["NetworkPolicy"]
                  if doc["spec"]["podSelector"]["matchLabels"].get(
                      "app.kubernetes.io/component") == "redis")
    sources = [source["podSelector"]["matchLabels"]["app.kubernetes.io/component"]
               for rule in policy["spec"]["ingress"] for source in rule["from"]]
    assert sources == ["coordinator"]


def test_chart_without_tls_makes_the_real_coordinator_refuse_plaintext_on_all_interfaces(tmp_path):
    helm = helm_or_skip()
    binaries, _ = binaries_or_skip()
    _, conf = rendered(helm, {})
    config = next(doc for doc in helm_template(helm) if doc["kind"] == "ConfigMap"
                  and "coordinator.conf" in doc["data"])["data"]["coordinator.conf"]
    (tmp_path / "coordinator.conf").write_text(config)
    # The credentials are checked before anything else: no Redis is needed to be refused.
    result = subprocess.run([str(binaries["forge-coordinator"]),
                             f"--config={tmp_path / 'coordinator.conf'}",
                             f"--blobs.dir={tmp_path / 'blobs'}"],
                            capture_output=True, text=True, timeout=30)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"refusing plaintext gRPC on {conf['coordinator.conf']['listen']}" in (
        result.stdout + result.stderr)
