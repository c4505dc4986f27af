"""The caching-allocator replay against closed forms of PyTorch's rules
(docs/references/frameworks.md §Caching allocator rules)."""

import pytest

from experiments.calibration.caching_allocator import (
    Alloc,
    CachingAllocator,
    Free,
    replay,
    round_size,
    segment_size,
)

MiB = 1 << 20


def test_sizes_round_up_to_512_bytes():
    assert [round_size(n) for n in (0, 1, 511, 512, 513, 1025)] == [512, 512, 512, 512, 1024, 1536]


def test_segment_sizes_follow_the_request_class():
    assert segment_size(512) == 2 * MiB  # small pool
    assert segment_size(MiB) == 2 * MiB  # 1 MiB is still small
    assert segment_size(MiB + 512) == 20 * MiB  # 1-10 MiB share a 20 MiB segment
    assert segment_size(10 * MiB) == 10 * MiB
    assert segment_size(10 * MiB + 1) == 12 * MiB  # rounded up to 2 MiB


@pytest.mark.parametrize("expandable", [False, True])
def test_a_freed_block_serves_an_equal_request(expandable):
    r = replay([Alloc("a", 300 * MiB), Free("a"), Alloc("b", 300 * MiB)], None, expandable)
    assert r.peak_reserved_bytes == r.peak_allocated_bytes
    assert r.reserved_bytes == 300 * MiB


def test_two_free_segments_never_merge():
    # two 12 MiB segments, both freed: 24 MiB cached, yet a 20 MiB request needs a third
    events = [Alloc("a", 12 * MiB), Alloc("b", 12 * MiB), Free("a"), Free("b")]
    r = replay([*events, Alloc("c", 20 * MiB)])
    assert r.num_device_allocs == 3
    assert r.peak_reserved_bytes == (12 + 12 + 20) * MiB


def test_an_expandable_segment_grows_from_its_free_end():
    # the same trace in one expandable segment: a and b share pages, c takes the freed space
    events = [Alloc("a", 12 * MiB), Alloc("b", 12 * MiB), Free("a"), Free("b")]
    r = replay([*events, Alloc("c", 20 * MiB)], expandable_segments=True)
    assert r.peak_reserved_bytes == 40 * MiB  # two 20 MiB pages mapped for a and b


def test_a_split_block_leaves_a_sliver_that_no_larger_request_uses():
    events = [Alloc("a", 100 * MiB), Free("a"), Alloc("b", 60 * MiB), Alloc("c", 100 * MiB)]
    fixed = replay(events)
    assert fixed.peak_reserved_bytes == 200 * MiB  # the 40 MiB rest of a's segment sits idle
    grown = replay(events, expandable_segments=True)
    assert grown.peak_reserved_bytes == 160 * MiB  # c starts in that rest


def test_a_large_block_splits_only_beyond_1_mib():
    allocator = CachingAllocator()
    allocator.malloc("a", 50 * MiB)
    allocator.free("a")
    allocator.malloc("b", 49 * MiB)  # the 1 MiB left is not split off: b holds all 50
    assert allocator.allocated_bytes == 50 * MiB
    allocator.free("b")
    allocator.malloc("c", 48 * MiB)  # 2 MiB left: split
    assert allocator.allocated_bytes == 48 * MiB


def test_blocks_serve_only_their_own_stream():
    r = replay([Alloc("a", 64 * MiB, stream=1), Free("a"), Alloc("b", 64 * MiB, stream=0)])
    assert r.peak_reserved_bytes == 128 * MiB


def test_small_requests_share_2_mib_segments():
    r = replay([Alloc(i, 4096) for i in range(512)])  # 512 x 4 KiB = 2 MiB
    assert (r.num_device_allocs, r.peak_reserved_bytes) == (1, 2 * MiB)


@pytest.mark.parametrize("expandable", [False, True])
def test_at_capacity_the_cache_is_released_before_more_is_taken(expandable):
    events = [Alloc("a", 100 * MiB), Alloc("x", 40 * MiB), Free("a"), Alloc("c", 120 * MiB)]
    r = replay(events, capacity_bytes=200 * MiB, expandable_segments=expandable)
    assert r.num_retries == 1
    assert r.reserved_bytes <= 200 * MiB
    unlimited = replay(events, expandable_segments=expandable)
    assert unlimited.reserved_bytes > 200 * MiB
