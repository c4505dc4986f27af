import os

from simtrain.sweep.executors import LocalExecutor
from tests.sweep.helpers import die_on_two, imported, process_id


def test_a_dying_worker_is_retried_once_then_recorded_and_the_rest_finish():
    items = [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
    results = dict(LocalExecutor(1).map_unordered(die_on_two, items))
    assert set(results) == {"a", "b", "c", "d"}
    assert [results[k]["x"] for k in "acd"] == [1, 3, 4]
    assert results["b"]["status"] == "error" and "died" in results["b"]["error"]


def test_a_started_pool_has_imported_its_preload_modules_before_the_first_task():
    module = "simtrain.sweep.evaluate"
    warm, cold = LocalExecutor(1, preload=(module,)), LocalExecutor(1)
    try:
        warm.start()
        assert dict(warm.map_unordered(imported, [("a", module)]))["a"]["imported"]
        assert not dict(cold.map_unordered(imported, [("a", module)]))["a"]["imported"]
    finally:
        warm.close()
        cold.close()


def test_with_caller_the_calling_process_runs_a_task_while_the_worker_runs_another():
    items = [(k, i) for i, k in enumerate("abcdef")]
    executor = LocalExecutor(1, with_caller=True)
    try:
        results = dict(executor.map_unordered(process_id, items))
    finally:
        executor.close()
    assert sorted(results) == list("abcdef")
    assert [results[k]["x"] for k in "abcdef"] == list(range(6))
    assert results["a"]["pid"] != os.getpid() == results["b"]["pid"]  # a: the worker's first
