"""The orrery_train module against a stand-in for its worker actor: a Unix socket server in
this process that answers the line protocol (docs/train.md "The line protocol") and records
what it was sent. The real worker is exercised by the train integration tests.

Usage: python3 tests/python/orrery_train_test.py (PYTHONPATH is set from this file's place).
"""

import importlib
import json
import os
import socket
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))


class FakeWorker:
    """Accepts one connection; answers each request line with `answers(request)`."""

    def __init__(self, answers):
        self.dir = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.dir.name, "train.sock")
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(1)
        self.answers = answers
        self.requests = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _ = self.server.accept()
        with conn, conn.makefile("rb") as lines:
            for line in lines:
                request = json.loads(line)
                self.requests.append(request)
                reply = self.answers(request)
                if reply is None:
                    return  # hang up without answering
                conn.sendall(reply if isinstance(reply, bytes) else
                             (json.dumps(reply) + "\n").encode())

    def close(self):
        self.server.close()
        self.dir.cleanup()


def answer_all(request):
    op = request["op"]
    if op == "get_context":
        return {"context": {"world_rank": 1, "world_size": 3}}
    if op == "get_checkpoint":
        return {"checkpoint": "/ckpt/3"}
    return {"ok": True}


class OrreryTrainTest(unittest.TestCase):
    def start(self, answers, heartbeat="0"):
        worker = FakeWorker(answers)
        self.addCleanup(worker.close)
        os.environ["ORRERY_TRAIN_SOCKET"] = worker.path
        os.environ["ORRERY_TRAIN_HEARTBEAT_S"] = heartbeat
        import orrery_train
        return importlib.reload(orrery_train), worker

    def test_requests_and_replies_are_one_json_object_a_line(self):
        train, worker = self.start(answer_all)
        self.assertEqual(train.get_context()["world_size"], 3)
        self.assertEqual(train.get_checkpoint(), "/ckpt/3")
        train.report({"loss": 0.5, "step": 2}, checkpoint_dir="ckpt")
        ops = [r["op"] for r in worker.requests]
        self.assertEqual(ops, ["hello", "get_context", "get_checkpoint", "report"])
        self.assertEqual(worker.requests[0]["pid"], os.getpid())
        last = worker.requests[-1]
        self.assertEqual(last["metrics"], {"loss": 0.5, "step": 2})
        self.assertEqual(last["checkpoint_dir"], os.path.abspath("ckpt"))

    def test_a_refusal_is_raised_with_the_workers_words(self):
        train, _ = self.start(lambda r: {"error": "metrics too large"} if r["op"] == "report"
                              else {"ok": True})
        with self.assertRaisesRegex(train.TrainError, "metrics too large"):
            train.report({"x": 1})

    def test_a_worker_that_hangs_up_is_an_error_not_a_hang(self):
        train, _ = self.start(lambda r: None if r["op"] == "report" else {"ok": True})
        with self.assertRaisesRegex(train.TrainError, "closed the channel"):
            train.report({"x": 1})

    def test_metrics_must_be_a_dict(self):
        train, worker = self.start(answer_all)
        with self.assertRaises(TypeError):
            train.report([1, 2])
        self.assertEqual(worker.requests, [])  # refused before connecting

    def test_heartbeats_are_sent_by_a_thread_of_their_own(self):
        beats = threading.Event()

        def answers(request):
            if request["op"] == "heartbeat":
                beats.set()
            return {"ok": True}

        train, _ = self.start(answers, heartbeat="0.05")
        train.get_context()
        self.assertTrue(beats.wait(10), "no heartbeat within 10 s")

    def test_outside_a_trainer_every_call_says_so(self):
        os.environ.pop("ORRERY_TRAIN_SOCKET", None)
        import orrery_train
        train = importlib.reload(orrery_train)
        with self.assertRaisesRegex(RuntimeError, "not started by an Orrery trainer"):
            train.get_context()


if __name__ == "__main__":
    unittest.main()
