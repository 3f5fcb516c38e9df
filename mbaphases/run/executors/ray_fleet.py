"""A fleet on Ray: each node offers slots with the custom resource ``mbaphases_slot``
(``ray start --resources '{"mbaphases_slot": N}'``): N CPU sets of the profile's size it gives the
suite, so Ray never places more blocks on a node than it has slots. A block (mbaphases.run.executors.blocks)
is one Ray task; a node lost mid-block has its task run again by Ray on another node. A shipped
batch's suite folder travels as the job's ``runtime_env`` ``working_dir``.
"""
from __future__ import annotations

import ipaddress
import os
import signal
import socket
import sys
from dataclasses import dataclass

from mbaphases import processes
from mbaphases.errors import UsageError
from mbaphases.run.executors import blocks

SLOT = "mbaphases_slot"
CANCEL_WAIT_S = 60  # a cancelled block ends its processes in seconds (processes.GRACE_S each)
INSECURE_WHY = ("a Ray cluster without token authentication runs the code of anyone who reaches it on every "
                "node")


def _host_port(address: str) -> tuple[str, str]:
    host, _, port = address.removeprefix("ray://").rpartition(":")
    return host, port


def _unreachable(address: str, timeout_s: float = 10.0) -> str | None:
    """Why HOST:PORT (or ray://HOST:PORT) takes no connection, checked before Ray's own join, which
    retries an unreachable head for minutes; None when it does, or for ``auto``."""
    if address == "auto":
        return None
    host, port = _host_port(address)
    if not host or not port.isdigit():
        return "not HOST:PORT"
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as e:
        return f"{host}:{port} takes no connection: {e.strerror or e}"
    return None


def _loopback_cluster(address: str) -> None:
    """A head on the loopback interface (a cluster of nodes on this one machine, as Ray's own test
    cluster makes): Ray's driver takes a loopback address for the host's own IP and waits there, for
    minutes, for a node that listens on the loopback only. Where the head answers on the loopback
    and not at the host's IP, the driver keeps to the loopback as that cluster's nodes do (Ray's
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0), read when Ray is first imported."""
    host, port = _host_port(address)
    if address == "auto" or "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER" in os.environ or "ray" in sys.modules:
        return
    try:
        loopback = ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
        # the address Ray's driver takes for this host: where its route out leaves from (a UDP
        # socket's connect sends nothing)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))
            own_ip = probe.getsockname()[0]
    except (OSError, ValueError):
        return
    if loopback and not ipaddress.ip_address(own_ip).is_loopback and _unreachable(f"{own_ip}:{port}", 2.0):
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"


def _join(ray, address: str, runtime_env: dict | None) -> None:
    """ray.init, this command's signal handling kept: Ray's driver puts in a SIGTERM handler that exits
    with the signal's number (15), where an interrupt here ends the command with 130 after ending
    what it started."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    try:
        ray.init(address=address, logging_level="ERROR", log_to_driver=False, configure_logging=False,
                 runtime_env=runtime_env)
    except SystemExit as e:
        if e.code in (signal.SIGTERM, signal.SIGHUP):
            raise processes.Interrupted(signal.Signals(e.code).name) from None
        raise
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)


def connect(address: str, insecure: bool, runtime_env: dict | None = None) -> RayBackend:
    """Joins the cluster at ``address`` (``auto``, ``HOST:PORT`` or ``ray://HOST:PORT``) and returns its
    slots per node. Refused, before anything is sent, where this driver does not authenticate with a
    token (unless ``insecure``), or where no node offers a slot."""
    if os.environ.get("RAY_AUTH_MODE") != "token" and not insecure:
        raise UsageError(f"--fleet {address}: this driver does not use token authentication (RAY_AUTH_MODE=token "
                         f"and the cluster's token); {INSECURE_WHY}; --fleet-insecure sends the work anyway")
    unreachable = _unreachable(address)
    if unreachable:
        raise UsageError(f"--fleet {address}: cannot join the cluster ({unreachable}); valid: auto, HOST:PORT or "
                         "ray://HOST:PORT of a running cluster")
    _loopback_cluster(address)
    try:
        import ray  # the fleet's extra, imported when a fleet is asked for: 0.4 s at every command's start
    except ImportError:
        raise UsageError(f"--fleet {address}: Ray is not installed here; pip install 'mbaphases[fleet]' (ray==2.60.0)") from None
    try:
        if not ray.is_initialized():  # a search's later batches join the cluster its first one joined
            _join(ray, address, runtime_env)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise UsageError(f"--fleet {address}: cannot join the cluster ({str(e).splitlines()[0]}); valid: auto, "
                         "HOST:PORT or ray://HOST:PORT of a running cluster") from None
    slots = {n["NodeID"]: int(n["Resources"].get(SLOT, 0)) for n in ray.nodes() if n["Alive"]}
    slots = {k: v for k, v in slots.items() if v}
    if not slots:
        ray.shutdown()
        raise UsageError(f"--fleet {address}: no node offers a slot (start nodes with --resources "
                         f"'{{\"{SLOT}\": N}}', N CPU sets of the profile's size)")
    return RayBackend(slots, f"the Ray cluster at {address}")


def run_on_node(spec: dict, bundle_bytes: bytes | None) -> dict:
    """The block, inside a Ray worker of its node."""
    import ray  # on the node, inside a Ray worker
    return blocks.run_block(spec, bundle_bytes, ray.get_runtime_context().get_node_id())


@dataclass
class RayBackend:
    """Blocks as Ray tasks on the slots of the cluster this driver joined (``connect``)."""
    nodes: dict  # node id -> slots it offers
    where: str
    one_machine = False  # nodes of their own: each hardware class under a machine name of its own

    def put(self, data: bytes):
        import ray
        return ray.put(data)

    def submit(self, spec: dict, bundle, node: str | None = None):
        import ray
        options = {"num_cpus": 0, "resources": {SLOT: 1}, "max_retries": blocks.RETRIES, "retry_exceptions": False}
        if node is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
        return ray.remote(run_on_node).options(**options).remote(spec, bundle)

    def wait(self, handles: list):
        import ray
        ready, _ = ray.wait(handles, num_returns=1)
        return ready[0]

    def result(self, handle) -> dict:
        import ray
        try:
            return ray.get(handle)
        except (ray.exceptions.RayError, ray.exceptions.TaskCancelledError) as e:
            raise blocks.BlockLost(type(e).__name__) from None

    def cancel(self, handles: list) -> None:
        """Every block interrupted, and waited for while it ends its processes: the driver's exit ends the
        Ray job, whose teardown kills the workers, and a worker killed mid-cleanup leaves what it started
        (asv's forkserver) running."""
        import ray
        for ref in handles:
            ray.cancel(ref, force=False)
        if handles:
            ray.wait(handles, num_returns=len(handles), timeout=CANCEL_WAIT_S)
