"""A real Ray cluster on this machine for the fleet's tests and measurements, in a process of its own
(Ray reads its authentication mode once, when first imported; the test process imports it earlier
without one). Run it with RAY_AUTH_MODE=token and RAY_AUTH_TOKEN set:

    python tests/suite/ray_cluster.py FOLDER [--nodes 2] [--cpus 1] [--slots 1] [--second-label LABEL] [--cache DIR]

A head without slots and NODES nodes of CPUS CPUs and SLOTS slots each, all on the loopback
interface, the second under a test hardware label when one is given, each node's cache of a shipped
batch's checkouts and environments in DIR (else the user's); writes FOLDER/address; removes
node i when FOLDER/remove-<i> appears; shuts down when FOLDER/stop appears (or its parent ends)."""
import argparse
import os
import time
from pathlib import Path

from ray.cluster_utils import Cluster

from mbaphases.hardware import TEST_LABEL_VAR
from mbaphases.run.executors.shipping import CACHE_VAR

parser = argparse.ArgumentParser()
parser.add_argument("folder", type=Path)
parser.add_argument("--nodes", type=int, default=2)
parser.add_argument("--cpus", type=int, default=1)
parser.add_argument("--slots", type=int, default=1)
parser.add_argument("--second-label", default=None, help="test-only: node 2 passes for another hardware class")
parser.add_argument("--cache", default=None, help="the nodes' cache of a shipped batch's checkouts and environments")
args = parser.parse_args()
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "node_ip_address": "127.0.0.1"})


def node_env(i: int) -> dict | None:
    env = {**({TEST_LABEL_VAR: args.second_label} if i == 1 and args.second_label else {}),
           **({CACHE_VAR: args.cache} if args.cache else {})}
    return env or None


nodes = [cluster.add_node(num_cpus=args.cpus, resources={"mbaphases_slot": args.slots}, node_ip_address="127.0.0.1",
                          env_vars=node_env(i))
         for i in range(args.nodes)]
cluster.wait_for_nodes()
(args.folder / "address").write_text(cluster.address)
parent = os.getppid()
try:
    while not (args.folder / "stop").exists() and os.getppid() == parent:
        for i, node in enumerate(nodes):
            if node is not None and (args.folder / f"remove-{i}").exists():
                cluster.remove_node(node)
                nodes[i] = None
                (args.folder / f"removed-{i}").write_text("")
        time.sleep(0.2)
finally:
    cluster.shutdown()
