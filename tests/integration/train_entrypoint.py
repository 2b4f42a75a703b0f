"""A framework process for the Entrypoint tests (train_entrypoint_test.cc), standard library
only: checks the launcher's environment, resumes from orrery_train.get_checkpoint(), and
reports a falling loss every step (rank 0 with a checkpoint).

Usage: train_entrypoint.py MODE STEPS SCRATCH
  MODE: ok; exit3 (rank 1 exits 3 at step 3 of a first attempt, after a line on stderr);
  kill9 (rank 1 SIGKILLs itself at step 3 of a first attempt).
"""

import os
import signal
import sys

import orrery_train

mode, steps, scratch = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ctx = orrery_train.get_context()
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])

expected = {
    "RANK": str(ctx["world_rank"]),
    "WORLD_SIZE": str(ctx["world_size"]),
    "LOCAL_RANK": str(ctx["local_rank"]),
    "NODE_RANK": str(ctx["node_rank"]),
    "GROUP_RANK": str(ctx["node_rank"]),
    "JAX_NUM_PROCESSES": str(world),
    "JAX_PROCESS_ID": str(rank),
    "JAX_COORDINATOR_ADDRESS": "%s:%s" % (os.environ.get("MASTER_ADDR"),
                                          os.environ.get("MASTER_PORT")),
    "FROM_ENTRYPOINT": "yes",
}
wrong = {k: (os.environ.get(k), v) for k, v in expected.items() if os.environ.get(k) != v}
if wrong or not os.environ.get("MASTER_PORT", "").isdigit():
    print("wrong environment: %r" % wrong, file=sys.stderr)
    sys.exit(2)
# The worker's one malloc arena (its GLIBC_TUNABLES) is its own, not its framework's; the
# huge pages are both's, and the node's note of what the framework gets is gone.
tunables = os.environ.get("GLIBC_TUNABLES", "")
if ("arena_max" in tunables or "glibc.malloc.hugetlb" not in tunables
        or "ORRERY_FRAMEWORK_GLIBC_TUNABLES" in os.environ):
    print("wrong malloc tunables reached the entrypoint: %r" % tunables, file=sys.stderr)
    sys.exit(2)
if os.path.realpath(os.getcwd()) != os.path.realpath(scratch):
    print("wrong working directory: %s" % os.getcwd(), file=sys.stderr)
    sys.exit(2)

checkpoint = orrery_train.get_checkpoint()
start = int(open(os.path.join(checkpoint, "step.txt")).read()) if checkpoint else 0
print("rank %d of %d starts after step %d" % (rank, world, start))

for step in range(start + 1, steps + 1):
    if rank == 1 and start == 0 and step == 3:
        if mode == "exit3":
            print("rank 1 gives up at step 3", file=sys.stderr)
            sys.exit(3)
        if mode == "kill9":
            os.kill(os.getpid(), signal.SIGKILL)
    directory = None
    if rank == 0:
        directory = os.path.join(scratch, "rank0_step%d" % step)
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "step.txt"), "w") as f:
            f.write(str(step))
    orrery_train.report({"step": step, "loss": 1.0 / step, "start": start, "world": world},
                        checkpoint_dir=directory)
