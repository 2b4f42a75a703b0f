"""Reports, checkpoints and context for a training process that Orrery Train started.

A trainer given an ``orrery::train::Entrypoint`` starts the entrypoint once per worker of its
gang, with torchrun's variables (and on a TPU slice the XLA and JAX ones) in the
environment, and this module on ``PYTHONPATH``. The process talks to its worker actor over
the Unix socket named by ``ORRERY_TRAIN_SOCKET``: one JSON object a line each way, as
docs/train.md "The line protocol" describes (a C or C++ program may speak it too).

    import orrery_train
    ctx = orrery_train.get_context()        # world_rank, local_rank, world_size, ...
    start = orrery_train.get_checkpoint()   # a directory, or None on a first attempt
    ...
    orrery_train.report({"loss": 0.25, "step": 10}, checkpoint_dir="ckpt")

Standard library only. Outside an Orrery worker (no ``ORRERY_TRAIN_SOCKET``) every call
raises ``RuntimeError`` saying so.
"""

import json
import os
import socket
import threading

__all__ = ["report", "get_checkpoint", "get_context", "TrainError"]

# A line longer than this from the worker is refused (the worker bounds what it reads too).
_MAX_LINE = 1 << 20


class TrainError(RuntimeError):
    """The worker refused a request or the channel to it broke."""


class _Channel:
    """The connection to this process's worker actor, with a heartbeat thread."""

    def __init__(self, path):
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(path)
        self._file = self._sock.makefile("rb")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        period = float(os.environ.get("ORRERY_TRAIN_HEARTBEAT_S", "1") or "1")
        self._ask({"op": "hello", "pid": os.getpid()})
        if period > 0:
            beat = threading.Thread(target=self._beat, args=(period,), daemon=True,
                                    name="orrery_train heartbeat")
            beat.start()

    def _ask(self, request):
        line = (json.dumps(request, separators=(",", ":")) + "\n").encode()
        with self._lock:
            try:
                self._sock.sendall(line)
                reply = self._file.readline(_MAX_LINE + 1)
            except OSError as e:
                raise TrainError("the channel to the Orrery worker broke: %s" % e) from e
        if not reply.endswith(b"\n"):
            raise TrainError("the Orrery worker closed the channel" if not reply
                             else "the Orrery worker's reply is too long")
        answer = json.loads(reply)
        if not isinstance(answer, dict):
            raise TrainError("the Orrery worker's reply is not an object: %r" % (answer,))
        if answer.get("error"):
            raise TrainError(str(answer["error"]))
        return answer

    def _beat(self, period):
        while not self._stop.wait(period):
            try:
                self._ask({"op": "heartbeat"})
            except (TrainError, ValueError):
                return


_channel = None
_channel_lock = threading.Lock()


def _get_channel():
    global _channel
    with _channel_lock:
        if _channel is None:
            path = os.environ.get("ORRERY_TRAIN_SOCKET")
            if not path:
                raise RuntimeError(
                    "orrery_train: not started by an Orrery trainer (ORRERY_TRAIN_SOCKET is "
                    "not set); run this script through orrery::train::TorchTrainer with an "
                    "Entrypoint")
            _channel = _Channel(path)
        return _channel


def report(metrics, checkpoint_dir=None):
    """Reports `metrics` (a dict of JSON values) and, optionally, a checkpoint directory.

    Returns once the worker has taken both: the checkpoint's files are copied into the run's
    storage before this returns, so the directory may be removed afterwards. Every rank
    should report at the same steps (as Ray Train asks); rank 0's reports are the run's.
    """
    if not isinstance(metrics, dict):
        raise TypeError("orrery_train.report: metrics must be a dict, not %s"
                        % type(metrics).__name__)
    request = {"op": "report", "metrics": metrics}
    if checkpoint_dir is not None:
        request["checkpoint_dir"] = os.path.abspath(os.fspath(checkpoint_dir))
    _get_channel()._ask(request)


def get_checkpoint():
    """The directory of the checkpoint to resume from, or None when there is none."""
    return _get_channel()._ask({"op": "get_checkpoint"}).get("checkpoint")


def get_context():
    """This process's place in the run: a dict with world_rank, local_rank, world_size,
    node_rank, local_world_size, storage_path, mesh_shape, trial_name and
    train_loop_config."""
    return _get_channel()._ask({"op": "get_context"}).get("context", {})
