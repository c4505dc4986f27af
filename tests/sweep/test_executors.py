from simtrain.sweep.executors import LocalExecutor
from tests.sweep.helpers import die_on_two


def test_a_dying_worker_is_retried_once_then_recorded_and_the_rest_finish():
    items = [("a", 1), ("b", 2), ("c", 3), ("d", 4)]
    results = dict(LocalExecutor(1).map_unordered(die_on_two, items))
    assert set(results) == {"a", "b", "c", "d"}
    assert [results[k]["x"] for k in "acd"] == [1, 3, 4]
    assert results["b"]["status"] == "error" and "died" in results["b"]["error"]
