"""The hostile-input corpus (tests/hostile/corpus.py) passes: every case is one clean refusal.

The corpus runs in one child process per input kind (tests/hostile/runner.py), each case
in-process under a time alarm, a shared address-space cap and a per-case peak-memory check.
A case passes when the command exits with code 2 and prints exactly one ``error:`` line
naming the field at fault, with no traceback, within 10 s and 1 GB, writing nothing outside
its output folder.
"""

from __future__ import annotations

from collections import Counter

import pytest

from tests.hostile.corpus import KINDS, all_cases
from tests.hostile.runner import MEMORY_LIMIT_BYTES, TIMEOUT_S, run_corpus


@pytest.fixture(scope="module")
def results() -> list[dict]:
    return run_corpus(jobs=2)


def test_the_corpus_is_large_and_covers_every_input_kind():
    counts = Counter(case.kind for case in all_cases())
    assert sum(counts.values()) >= 300
    assert set(counts) == set(KINDS) and min(counts.values()) >= 20


@pytest.mark.parametrize("kind", KINDS)
def test_every_case_is_refused_on_one_clean_line(results, kind):
    mine = [r for r in results if r["kind"] == kind]
    assert len(mine) == sum(case.kind == kind for case in all_cases())
    failures = [
        f"{r['name']}: {','.join(r['outcomes'])} (exit {r['code']}) {r['stderr'][:200]!r} "
        f"{r['detail'][:200]}"
        for r in mine
        if r["outcomes"]
    ]
    assert not failures, "\n".join(failures)
    assert max(r["wall_s"] for r in mine) < TIMEOUT_S
    assert max(r["peak_rss_bytes"] for r in mine) < MEMORY_LIMIT_BYTES
