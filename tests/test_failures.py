"""The one-line cause of a failed launch (reasonrl/failures.py)."""

from __future__ import annotations

from ray.exceptions import ActorDiedError, RayTaskError

from reasonrl.failures import ray_failure

#: Ray 2.60's message for an actor whose process was killed (from a two-node run, integration_tests/test_ray_nodes.py)
DIED = """The actor died unexpectedly before finishing this task.
\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict
\tactor_id: d1b613b0746f8e8fb0574dc201000000
\tpid: 19955
\tname: g2Ll9vWorkerDict_0:0
\tip: 192.0.2.2
The actor is dead because its worker process has died."""


class _Died(ActorDiedError):
    def __str__(self) -> str:
        return DIED


def test_a_dead_worker_is_named_with_its_pid_and_node():
    line = ray_failure(_Died())
    assert line.startswith("a Ray worker died: WorkerDict (pid 19955, ip 192.0.2.2)")
    assert line.endswith("Run the same command to resume from the last checkpoint")


def test_the_task_runners_wrapped_error_is_recognised():
    # the driver sees the TaskRunner's RayTaskError, made an instance of the worker's error
    wrapped = RayTaskError("TaskRunner.run", "traceback", _Died()).as_instanceof_cause()
    assert ray_failure(wrapped).startswith("a Ray worker died: WorkerDict (pid 19955")


def test_other_errors_have_no_ray_cause():
    assert ray_failure(ValueError("bad value")) is None
    assert ray_failure(ActorDiedError()).startswith("a Ray worker died — its process ended")


def test_a_workers_own_exception_is_named_with_its_call():
    # Ray's traceback text as the driver got it from a failed checkpoint save (abridged)
    traceback = (
        "ray::TaskRunnerV1.run() (pid=24480, ip=192.0.2.2)\n  File ...\n"
        "ray.exceptions.RayTaskError(AttributeError): ray::WorkerDict.actor_rollout_save_checkpoint() (pid=24635)\n"
    )
    wrapped = RayTaskError("run", traceback, AttributeError("'NoneType' object has no attribute 'storage'"))
    line = ray_failure(wrapped.as_instanceof_cause())
    assert line.startswith(
        "AttributeError: 'NoneType' object has no attribute 'storage' (raised in WorkerDict.actor_rollout_save_checkpoint"
    ), line


def test_the_cpu_platform_asks_for_megatron_without_failing_where_it_is_absent():
    from reasonrl.plugins.cpu_platform import installed

    # importlib.util.find_spec("megatron.core") raises when `megatron` itself is missing (the README's
    # main job installs no megatron extra): the check must answer False instead
    assert installed("torch") and not installed("no_such_package_here.core")
