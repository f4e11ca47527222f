"""forge.client: the coordinator's JobService (proto/forge/v1/service.proto) over gRPC.

Uploads follow the service's contract: MissingBlobs with every weight digest the graph names
(inlined ones need no upload), then SubmitJob with the header and only the blobs reported missing,
in chunks of at most 1 MiB. Errors name the coordinator's address, the RPC and the gRPC code, as
the forge CLI's do: "coordinator 127.0.0.1:50051: GetJob failed (NOT_FOUND): ...".

grpcio is imported when a JobClient is made, not with this module: ForgeError and the runtime
(forge.runtime) work on machines without grpcio.
"""

from __future__ import annotations

import importlib
import os
import time
import types
from typing import Callable, Iterable, Iterator, Mapping

from forge._protos import service_pb2, task_pb2

DEFAULT_SERVER = "127.0.0.1:50051"
CHUNK_BYTES = 1 << 20  # the service's limit per BlobChunk
MAX_MESSAGE_BYTES = 256 << 20  # GetResults with every result and the graph can be large

TERMINAL_STATES = frozenset({task_pb2.JOB_STATE_DONE, task_pb2.JOB_STATE_FAILED,
                             task_pb2.JOB_STATE_CANCELLED})
_RESUMABLE = ("UNAVAILABLE", "INTERNAL")  # how a stream breaks when its coordinator restarts


class ForgeError(Exception):
    """Base class of the Python SDK's errors."""


class ServerError(ForgeError):
    """An RPC to the coordinator failed: unreachable, refused, or answered with an error."""

    def __init__(self, address: str, method: str, code: str, details: str):
        self.address, self.method, self.code, self.details = address, method, code, details
        hint = ""
        if code in ("UNAVAILABLE", "DEADLINE_EXCEEDED"):
            hint = (" (is forge-coordinator running there? pass server=HOST:PORT or set "
                    "FORGE_SERVER)")
        super().__init__(f"coordinator {address}: {method} failed ({code}): {details}{hint}")


class JobError(ForgeError):
    """A job ended without results to use: FAILED or CANCELLED."""

    def __init__(self, job, address: str):
        self.job, self.address = job, address
        self.job_id = job.id
        self.state = state_name(job.state)
        detail = f": {job.error}" if job.error else ""
        super().__init__(f"coordinator {address}: job {job.id} ended {self.state}{detail}")


def state_name(state: int) -> str:
    """'DONE' for JOB_STATE_DONE."""
    return task_pb2.JobState.Name(state).removeprefix("JOB_STATE_")


def resolve_server(server: str | None) -> str:
    """The address to use: `server`, else $FORGE_SERVER, else DEFAULT_SERVER."""
    return server or os.environ.get("FORGE_SERVER") or DEFAULT_SERVER


def upload_digests(graph) -> list[str]:
    """Digests of the blobs a graph names that are not inlined into it, each once, in order."""
    digests: dict[str, None] = {}
    for graph_input in graph.inputs:
        data = graph_input.data
        if data.sha256 and not data.inline_bytes:
            digests[data.sha256] = None
    return list(digests)


def _chunks(header, digests: Iterable[str], blobs: Mapping[str, bytes]) -> Iterator:
    yield service_pb2.SubmitJobRequest(header=header)
    for digest in digests:
        data = blobs[digest]
        for offset in range(0, max(len(data), 1), CHUNK_BYTES):
            yield service_pb2.SubmitJobRequest(chunk=service_pb2.BlobChunk(
                sha256=digest, offset=offset, data=data[offset:offset + CHUNK_BYTES]))


def _job_service_methods(channel) -> types.SimpleNamespace:
    """JobService's methods on `channel`, called by name. The generated service_pb2_grpc stubs
    refuse a grpcio older than the grpcio-tools that generated them (the GPU machine's 1.84
    against 1.85 here); the methods themselves work with any grpcio."""
    pb = service_pb2

    def method(kind: str, name: str, request, response):
        return getattr(channel, kind)(f"/forge.v1.JobService/{name}",
                                      request_serializer=request.SerializeToString,
                                      response_deserializer=response.FromString)

    return types.SimpleNamespace(
        MissingBlobs=method("unary_unary", "MissingBlobs", pb.MissingBlobsRequest,
                            pb.MissingBlobsResponse),
        SubmitJob=method("stream_unary", "SubmitJob", pb.SubmitJobRequest, pb.SubmitJobResponse),
        GetJob=method("unary_unary", "GetJob", pb.GetJobRequest, pb.GetJobResponse),
        WatchJob=method("unary_stream", "WatchJob", pb.WatchJobRequest, pb.JobEvent),
        CancelJob=method("unary_unary", "CancelJob", pb.CancelJobRequest, pb.CancelJobResponse),
        GetResults=method("unary_unary", "GetResults", pb.GetResultsRequest,
                          pb.GetResultsResponse),
    )


def channel_credentials(grpc, tls: bool | None, tls_ca: str | None, token: str | None):
    """gRPC channel credentials for the arguments or their FORGE_* variables; None: plaintext."""
    if tls is None:
        tls = os.environ.get("FORGE_TLS", "").lower() in ("1", "true", "yes")
    tls_ca = tls_ca or os.environ.get("FORGE_TLS_CA") or None
    token = token or os.environ.get("FORGE_TOKEN") or None
    if not tls:
        if token:
            raise ForgeError("a token is configured (token= or FORGE_TOKEN) but TLS is off: "
                             "refusing to send it in plaintext; pass tls=True or set FORGE_TLS=1")
        return None
    roots = None
    if tls_ca:
        try:
            with open(tls_ca, "rb") as pem:
                roots = pem.read()
        except OSError as err:
            raise ForgeError(f"cannot read tls_ca file {tls_ca}: {err}") from err
    credentials = grpc.ssl_channel_credentials(root_certificates=roots)
    if token:
        credentials = grpc.composite_channel_credentials(
            credentials, grpc.access_token_call_credentials(token))
    return credentials


class JobClient:
    """JobService calls on one channel. Unary calls have `timeout` seconds as their deadline."""

    def __init__(self, server: str | None = None, *, timeout: float = 30.0,
                 tls: bool | None = None, tls_ca: str | None = None, token: str | None = None):
        """Connects to `server` (else $FORGE_SERVER, else DEFAULT_SERVER).

        tls (else $FORGE_TLS in 1/true/yes) uses TLS, checked against the PEM roots in the file
        tls_ca (else $FORGE_TLS_CA, else the system's); token (else $FORGE_TOKEN) is sent as
        "authorization: Bearer TOKEN" on every call and needs TLS, as in the forge CLI.
        """
        try:
            grpc = importlib.import_module("grpc")
        except ImportError as err:
            raise ForgeError("the Forge SDK needs grpcio to talk to the coordinator "
                             "(pip install grpcio); without it, drive the forge CLI "
                             "(build/client/forge/forge) and use forge.runtime.load_plan on "
                             "its result bundle") from err
        self._grpc = grpc
        self.address = resolve_server(server)
        self.timeout = timeout
        options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]
        credentials = channel_credentials(grpc, tls, tls_ca, token)
        self._channel = (grpc.secure_channel(self.address, credentials, options=options)
                         if credentials is not None
                         else grpc.insecure_channel(self.address, options=options))
        self._stub = _job_service_methods(self._channel)

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "JobClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _error(self, method: str, err) -> ServerError:
        code = err.code().name if err.code() is not None else "UNKNOWN"
        return ServerError(self.address, method, code, err.details() or str(err))

    def _unary(self, method: str, request, timeout: float | None = None):
        try:
            return getattr(self._stub, method)(request, timeout=timeout or self.timeout)
        except self._grpc.RpcError as err:
            raise self._error(method, err) from None

    def ping(self) -> None:
        """Fails fast (ServerError) when the coordinator cannot be reached: a MissingBlobs call
        for no blobs, the cheapest RPC there is."""
        self._unary("MissingBlobs", service_pb2.MissingBlobsRequest())

    def missing_blobs(self, digests: Iterable[str]) -> list[str]:
        request = service_pb2.MissingBlobsRequest(sha256=list(digests))
        return list(self._unary("MissingBlobs", request).missing_sha256)

    def submit(self, graph, blobs: Mapping[str, bytes], options=None):
        """Uploads the blobs the coordinator lacks and starts a job; the SubmitJobResponse."""
        missing = self.missing_blobs(upload_digests(graph))
        absent = [d for d in missing if d not in blobs]
        if absent:
            raise ForgeError(f"the coordinator lacks blob {absent[0]} and it was not given "
                             f"({len(absent)} missing in all)")
        header = service_pb2.SubmitJobHeader(graph=graph, options=options or task_pb2.JobOptions())
        upload_bytes = sum(len(blobs[d]) for d in missing)
        # Uploads take as long as they take: the deadline grows with the bytes (at 10 MB/s).
        timeout = self.timeout + upload_bytes / 10e6
        try:
            return self._stub.SubmitJob(_chunks(header, missing, blobs), timeout=timeout)
        except self._grpc.RpcError as err:
            raise self._error("SubmitJob", err) from None

    def get_job(self, job_id: str):
        return self._unary("GetJob", service_pb2.GetJobRequest(job_id=job_id)).job

    def cancel(self, job_id: str, reason: str = ""):
        request = service_pb2.CancelJobRequest(job_id=job_id, reason=reason)
        return self._unary("CancelJob", request).job

    def get_results(self, job_id: str, include_all_results: bool = False):
        request = service_pb2.GetResultsRequest(job_id=job_id,
                                                include_all_results=include_all_results)
        return self._unary("GetResults", request)

    def watch(self, job_id: str, resume_after: str = "") -> Iterator:
        """The job's events until it ends (the stream has no deadline)."""
        request = service_pb2.WatchJobRequest(job_id=job_id, resume_after=resume_after)
        try:
            yield from self._stub.WatchJob(request)
        except self._grpc.RpcError as err:
            raise self._error("WatchJob", err) from None

    def wait(self, job_id: str, on_event: Callable | None = None, *, reconnects: int = 5):
        """Follows the job until it ends and returns its final Job. A broken stream (a coordinator
        restart) is resumed after the last event seen, up to `reconnects` times in a row."""
        last_event, failures = "", 0
        while True:
            try:
                for event in self.watch(job_id, last_event):
                    last_event, failures = event.event_id, 0
                    if on_event is not None:
                        on_event(event)
                job = self.get_job(job_id)
            except ServerError as err:
                failures += 1
                if err.code not in _RESUMABLE or failures > reconnects:
                    raise
                time.sleep(min(0.2 * 2 ** failures, 5.0))
                continue
            if job.state in TERMINAL_STATES:
                return job
            time.sleep(0.2)  # the stream ended early: follow it again


__all__ = ["DEFAULT_SERVER", "ForgeError", "JobClient", "JobError", "ServerError", "resolve_server",
           "state_name", "upload_digests"]
