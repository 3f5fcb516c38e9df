"""A real Ray cluster on this machine for the fleet's tests, in a process of its own (Ray reads its
authentication mode once, when first imported; the test process imports it earlier without one).

    python ray_cluster.py FOLDER [LABEL_OF_NODE_2]

Starts a head without slots and two nodes of one slot each on the loopback interface, the second
under a test hardware label; writes FOLDER/address; removes node i when FOLDER/remove-<i> appears;
shuts down when FOLDER/stop appears (or its parent ends)."""
import os
import sys
import time
from pathlib import Path

from ray.cluster_utils import Cluster

from mbaphases.hardware import TEST_LABEL_VAR

folder = Path(sys.argv[1])
label = sys.argv[2] if len(sys.argv) > 2 else "second-class"
slot = {"mbaphases_slot": 1}
cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "node_ip_address": "127.0.0.1"})
nodes = [cluster.add_node(num_cpus=1, resources=slot, node_ip_address="127.0.0.1"),
         cluster.add_node(num_cpus=1, resources=slot, node_ip_address="127.0.0.1", env_vars={TEST_LABEL_VAR: label})]
cluster.wait_for_nodes()
(folder / "address").write_text(cluster.address)
parent = os.getppid()
try:
    while not (folder / "stop").exists() and os.getppid() == parent:
        for i, node in enumerate(nodes):
            if node is not None and (folder / f"remove-{i}").exists():
                cluster.remove_node(node)
                nodes[i] = None
                (folder / f"removed-{i}").write_text("")
        time.sleep(0.2)
finally:
    cluster.shutdown()
