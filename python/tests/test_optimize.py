"""forge.optimize against the real service on loopback: redis-server, forge-coordinator and a
forge-worker emulating an H200 (real code generation and NVRTC, PREDICTED times), with the forge
CLI fetching the bundle. Without a GPU the round trip goes up to where one is needed: export,
upload, progress, results, the bundle and its plan (run through ATen on the CPU); with one, the
optimized module itself is checked.
"""

import copy
import importlib.util
import os
import pathlib
import re
import shutil
import socket
import subprocess
import time

import pytest
import torch

import forge
from forge.client import JobClient, upload_digests
from forge.optimize import OutputMismatchError, check_outputs, find_cli
from forge.runtime import load_plan, model_digest, read_plan
from llama_block import LlamaBlock
from models import Mlp

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("FORGE_BUILD_DIR", ROOT / "build"))
BINARIES = {"forge-coordinator": BUILD / "server" / "forge-coordinator",
            "forge-worker": BUILD / "worker" / "daemon" / "forge-worker",
            "forge": BUILD / "client" / "forge" / "forge"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Service:
    """The processes, each with its log; stopped (SIGTERM, then SIGKILL) in reverse order."""

    def __init__(self, directory: pathlib.Path):
        self.directory = directory
        self.processes = []
        self.address = ""

    def start(self, name, argv):
        log = self.directory / f"{name}.log"
        with open(log, "w") as out:
            process = subprocess.Popen([str(a) for a in argv], stdout=out,
                                       stderr=subprocess.STDOUT)
        self.processes.append((process, log))
        return log

    def start_redis(self, redis_server) -> int:
        """A redis-server on a free loopback port, data in the directory; returns the port."""
        port = free_port()
        self.start("redis", [redis_server, "--port", port, "--bind", "127.0.0.1",
                             "--dir", self.directory, "--save", ""])
        self.wait_for(lambda: accepts(port), "redis-server")
        return port

    def wait_for(self, condition, what, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = condition()
            if value:
                return value
            if any(process.poll() is not None for process, _ in self.processes):
                break
            time.sleep(0.05)
        raise AssertionError(f"waiting for {what} failed:\n{self.logs()}")

    def logs(self) -> str:
        return "\n".join(f"--- {log.name}:\n{log.read_text()[-3000:]}" for _, log in self.processes)

    def stop(self):
        for process, _ in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def grpc_or_skip():
    if importlib.util.find_spec("grpc") is None:
        pytest.skip("the SDK's gRPC client needs grpcio (pip install grpcio)")


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    grpc_or_skip()
    missing = [str(path) for path in BINARIES.values() if not path.is_file()]
    if missing:
        pytest.skip(f"not built: {', '.join(missing)} (build them: cmake -S . -B build -G Ninja "
                    "&& ninja -C build forge-coordinator forge-worker forge)")
    redis_server = os.environ.get("FORGE_REDIS_SERVER") or shutil.which("redis-server")
    if not redis_server:
        pytest.skip("redis-server not found (set FORGE_REDIS_SERVER or install redis-server)")
    directory = tmp_path_factory.mktemp("service")
    stack = Service(directory)
    try:
        redis_port = stack.start_redis(redis_server)
        log = stack.start("coordinator", [
            BINARIES["forge-coordinator"], "--listen=127.0.0.1:0", f"--redis.port={redis_port}",
            f"--blobs.dir={directory / 'blobs'}", "--metrics.listen=", "--watch.wait=100ms",
            "--scheduler.tick=100ms", "--heartbeat.interval=300ms",
            "--search.trials-per-task=4", "--search.min-trials-per-task=2"])
        stack.address = stack.wait_for(
            lambda: (re.findall(r"listening on (127\.0\.0\.1:\d+)", log.read_text()) or [""])[0],
            "the coordinator to listen")
        stack.start("worker", [BINARIES["forge-worker"], f"--coordinator={stack.address}",
                               "--emulate=H200", "--compile-threads=1",
                               f"--compile-cache-dir={directory / 'cubins'}"])
        yield stack
    finally:
        stack.stop()


def snapshot(module):
    return module.training, copy.deepcopy(module.state_dict())


def assert_untouched(module, before):
    training, state = before
    assert module.training == training
    after = module.state_dict()
    assert after.keys() == state.keys()
    for name, tensor in state.items():
        assert torch.equal(after[name], tensor), f"{name} changed"


def llama_case():
    torch.manual_seed(0)
    return LlamaBlock().eval(), (torch.randn(2, 16, 64),)


def test_the_round_trip_up_to_the_gpu(service, tmp_path):
    module, inputs = llama_case()
    before = snapshot(module)
    events = []
    job = forge.optimize(module, inputs, server=service.address, wait=False,
                         bundle_dir=tmp_path / "bundle")
    final = job.wait(progress=events.append)
    assert forge.client.state_name(final.state) == "DONE" == forge.client.state_name(
        job.status().state)
    assert final.progress.tasks_done == final.progress.tasks_total > 0
    assert events[-1].state_changed.current == final.state
    assert any(e.HasField("task_finished") for e in events)

    bundle = job.fetch_bundle()
    plan = read_plan(bundle)
    graph = job.exported.graph
    assert plan.model_digest == model_digest(graph) == final.model_digest
    results = job.client.get_results(job.id)
    assert results.graph == graph
    assert {t.task.digest for t in results.tasks} == {step.task for step in plan.steps}
    # Every node of the model runs in exactly one step, and the emulated worker's winners
    # include generated kernels, whose regenerated sources are in the bundle.
    covered = [node for step in plan.steps for node in step.nodes]
    assert sorted(covered) == sorted(node.name for node in graph.nodes)
    kernels = [s for s in plan.compiled_steps() if s.implementation == "kernel"]
    assert kernels and all(s.source.read_text().count(s.kernel_name) for s in kernels)
    assert (bundle / "report.md").read_text().count("PREDICTED")

    # The plan's dataflow, weights and outputs, through ATen on the CPU.
    optimized = load_plan(bundle, module, aten_only=True)
    torch.testing.assert_close(optimized(*inputs), module(*inputs))
    assert_untouched(module, before)


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is present: see the test below")
def test_without_a_gpu_optimize_stops_at_the_kernels_and_says_why(service, tmp_path, capsys):
    module, inputs = llama_case()
    before = snapshot(module)
    with pytest.raises(forge.PlanError, match=r"runs on a CUDA GPU; the plan was asked to run on "
                                              r"cpu"):
        forge.optimize(module, inputs, server=service.address, bundle_dir=tmp_path / "bundle")
    assert re.search(r"forge job-\d+-[0-9a-f]{16}: done, tasks (\d+)/\1", capsys.readouterr().err)
    assert (tmp_path / "bundle" / "plan.json").is_file()
    assert_untouched(module, before)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_optimize_returns_a_module_that_matches_the_original(service, tmp_path):
    module, inputs = llama_case()
    module, inputs = module.cuda(), tuple(t.cuda() for t in inputs)
    before = snapshot(module)
    optimized = forge.optimize(module, inputs, server=service.address,
                               bundle_dir=tmp_path / "bundle")
    assert optimized.ops, "the plan runs generated kernels"
    fresh = torch.randn_like(inputs[0])
    torch.testing.assert_close(optimized(fresh), module(fresh), rtol=1e-4, atol=1e-4)
    assert_untouched(module, before)


def test_resubmitting_a_model_uploads_no_weights(service):
    torch.manual_seed(1234)
    exported = forge.export(Mlp(width=32, hidden=48).eval(), (torch.randn(4, 32),))
    digests = upload_digests(exported.graph)
    with JobClient(service.address) as client:
        assert client.missing_blobs(digests) == digests
        first = client.submit(exported.graph, exported.blobs)
        assert first.blobs_stored == len(digests)
        assert client.missing_blobs(digests) == []
        second = client.submit(exported.graph, exported.blobs)
        assert second.blobs_stored == 0
        assert second.job.model_digest == first.job.model_digest
        for job in (first.job, second.job):
            client.wait(job.id)


def test_an_unreachable_server_is_a_quick_clear_error():
    grpc_or_skip()
    module, inputs = llama_case()
    before = snapshot(module)
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    with pytest.raises(forge.ServerError) as error:
        forge.optimize(module, inputs, server=address)
    assert time.monotonic() - started < 10
    assert error.value.address == address and error.value.code == "UNAVAILABLE"
    assert f"coordinator {address}: MissingBlobs failed (UNAVAILABLE)" in str(error.value)
    assert_untouched(module, before)


def test_an_unknown_job_is_not_waited_for(service):
    with JobClient(service.address) as client:
        with pytest.raises(forge.ServerError, match=r"(GetJob|WatchJob) failed \(NOT_FOUND\)"):
            client.wait("job-that-never-was")


def test_a_cancelled_job_is_an_error_naming_the_job(service):
    torch.manual_seed(99)
    module, inputs = Mlp(width=96, hidden=320).eval(), (torch.randn(16, 96),)
    before = snapshot(module)
    canceller = JobClient(service.address)

    def cancel_at_first_event(event):
        if not getattr(cancel_at_first_event, "done", False):
            cancel_at_first_event.done = True
            canceller.cancel(event.job_id, "the test cancels it")

    with pytest.raises(forge.JobError) as error:
        forge.optimize(module, inputs, server=service.address, budget=100000,
                       progress=cancel_at_first_event)
    assert error.value.state == "CANCELLED"
    assert re.fullmatch(rf"coordinator {service.address}: job job-\d+-[0-9a-f]{{16}} ended CANCELLED.*",
                        str(error.value))
    assert_untouched(module, before)
    canceller.close()


def test_a_job_cancelled_through_its_handle_has_no_result(service):
    torch.manual_seed(98)
    job = forge.optimize(Mlp(width=80, hidden=272).eval(), (torch.randn(16, 80),),
                         server=service.address, budget=100000, wait=False)
    assert forge.client.state_name(job.cancel().state) == "CANCELLED"
    with pytest.raises(forge.JobError, match=f"job {job.id} ended CANCELLED"):
        job.result(progress=False)


def test_the_cli_is_looked_for_and_its_absence_explained(tmp_path, monkeypatch):
    monkeypatch.setenv("FORGE_CLI", str(tmp_path / "no-forge"))
    with pytest.raises(forge.ForgeError, match="FORGE_CLI=.*no-forge is not an executable"):
        find_cli()
    monkeypatch.delenv("FORGE_CLI")
    monkeypatch.setenv("PATH", str(tmp_path))
    if BINARIES["forge"].is_file():
        assert find_cli().resolve() == BINARIES["forge"].resolve()
    else:
        with pytest.raises(forge.ForgeError, match="ninja -C build forge"):
            find_cli()


def test_outputs_are_checked_with_the_judges_tolerances():
    want = {"y": torch.ones(4, 5), "half": torch.ones(3, dtype=torch.bfloat16),
            "index": torch.arange(3)}
    close = {"y": want["y"] + 5e-5, "half": want["half"] * 1.0078125, "index": torch.arange(3)}
    check_outputs(close, want)
    off = dict(close, y=want["y"].clone().index_put_((torch.tensor([2]), torch.tensor([3])),
                                                     torch.tensor(1.001)))
    with pytest.raises(OutputMismatchError, match=r"output 0: 1 of 20 elements .* first at "
                                                  r"\[2, 3\]: 1.001"):
        check_outputs(off, want)
    with pytest.raises(OutputMismatchError, match="output 2: 1 elements differ"):
        check_outputs(dict(close, index=torch.tensor([0, 1, 3])), want)
    with pytest.raises(OutputMismatchError, match=r"output 0: torch.float32\[4, 4\] where"):
        check_outputs(dict(close, y=torch.ones(4, 4)), want)
    with pytest.raises(OutputMismatchError, match="returns 2 tensors, the original 3"):
        check_outputs([want["y"], want["half"]], want)


def test_the_sdk_reaches_a_tls_coordinator_with_its_token(tmp_path, monkeypatch):
    grpc_or_skip()
    redis_server = os.environ.get("FORGE_REDIS_SERVER") or shutil.which("redis-server")
    if not BINARIES["forge-coordinator"].is_file() or not redis_server or \
            not shutil.which("openssl"):
        pytest.skip("needs forge-coordinator, redis-server and openssl")
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"]
    (tmp_path / "san.ext").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    for command in (["req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.pem",
                     "-subj", "/CN=forge-test-ca"],
                    ["req", *ec, "-keyout", "server.key", "-out", "server.csr",
                     "-subj", "/CN=localhost"],
                    ["x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                     "-CAcreateserial", "-out", "server.pem", "-days", "1",
                     "-extfile", "san.ext"]):
        subprocess.run(["openssl", *command], cwd=tmp_path, check=True, capture_output=True)
    (tmp_path / "tokens").write_text("sdk-submit-token-00001 dana submit\n")
    stack = Service(tmp_path)
    try:
        redis_port = stack.start_redis(redis_server)
        port = free_port()
        stack.start("coordinator", [
            BINARIES["forge-coordinator"], f"--listen=127.0.0.1:{port}",
            f"--redis.port={redis_port}", f"--blobs.dir={tmp_path / 'blobs'}",
            "--metrics.listen=", f"--tls.cert={tmp_path / 'server.pem'}",
            f"--tls.key={tmp_path / 'server.key'}", f"--auth.tokens={tmp_path / 'tokens'}"])
        stack.wait_for(lambda: accepts(port), "the coordinator to listen")
        address = f"127.0.0.1:{port}"  # by IP (the certificate names it): no /etc/hosts needed
        ca = str(tmp_path / "ca.pem")
        with JobClient(address, tls=True, tls_ca=ca, token="sdk-submit-token-00001") as client:
            client.ping()
        monkeypatch.setenv("FORGE_TLS", "1")
        monkeypatch.setenv("FORGE_TLS_CA", ca)
        monkeypatch.setenv("FORGE_TOKEN", "sdk-submit-token-00001")
        with JobClient(address) as client:  # the same from the environment
            client.ping()
        monkeypatch.delenv("FORGE_TOKEN")
        with JobClient(address) as client, pytest.raises(forge.ServerError) as error:
            client.ping()
        assert error.value.code == "UNAUTHENTICATED"
        monkeypatch.setenv("FORGE_TLS", "0")
        with pytest.raises(forge.ForgeError, match="refusing to send it in plaintext"):
            JobClient(address, token="sdk-submit-token-00001")
    finally:
        stack.stop()


def linear_case():
    torch.manual_seed(321)  # weights no other test uploads
    return torch.nn.Linear(7, 5).eval(), (torch.randn(3, 7),)


def test_intake_checks_run_before_anything_is_uploaded(service):
    # The coordinator's own checks, through the CLI's `forge submit --check`: the job's options
    # are refused with the coordinator's words, and not one weight reaches it.
    module, inputs = linear_case()
    exported = forge.export(module, inputs)
    digests = upload_digests(exported.graph)
    with pytest.raises(forge.InvalidModelError, match="options.budget must not be negative"):
        forge.optimize(module, inputs, server=service.address, budget=-5)
    with JobClient(service.address) as client:
        assert client.missing_blobs(digests) == digests


def test_a_graph_intake_refuses_is_refused_by_the_sdk_with_its_words():
    from forge.optimize import check_before_upload

    module, inputs = linear_case()
    exported = forge.export(module, inputs)
    options = forge._protos.task_pb2.JobOptions(target_arch="sm_90")
    check_before_upload(exported.graph, options)  # a valid model passes
    exported.graph.values[0].tensor.shape[0] = -3
    with pytest.raises(forge.InvalidModelError, match="not submitted: graph rejected: .*-3"):
        check_before_upload(exported.graph, options)
