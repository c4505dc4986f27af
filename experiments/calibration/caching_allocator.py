"""A replay of PyTorch's CUDA caching allocator: reserved bytes from an allocation trace.

PyTorch keeps freed device memory cached; what a job's ``max_memory_reserved`` reports is the
peak of the memory the allocator holds from the driver, not of the live tensors. The rules
replayed here are those of ``c10/cuda/CUDACachingAllocator.cpp`` with its default settings
(docs/references/frameworks.md §Caching allocator rules):

- every request is rounded up to a multiple of 512 bytes; requests up to 1 MiB are served
  from a small pool, larger ones from a large pool; a block is reused only on the stream it
  was allocated on;
- a request takes the smallest cached free block of its pool and stream that fits (best fit,
  lowest address among equal sizes) and splits off the rest when more than 1 MiB remains
  (large pool) or at least 512 bytes (small pool);
- a freed block merges with the free blocks next to it in its own segment;
- with fixed segments (the default), a request no cached block can serve gets a segment of
  its own from ``cudaMalloc``: 2 MiB for the small pool, 20 MiB for a 1-10 MiB request, the
  request rounded up to 2 MiB otherwise; segments never merge with each other;
- with ``expandable_segments`` each stream has one segment per pool that grows: a request no
  cached block can serve takes the lowest address where free and not-yet-mapped space
  together fit it (normally the segment's end, the free block there included) and maps the
  missing pages (2 MiB small pool, 20 MiB large pool); any remainder of at least 512 bytes is
  split off;
- when the device cannot give more, the allocator returns what it caches (fixed segments:
  every segment with no live block; expandable: every whole free page) and retries.

Plain data in, bytes out: :func:`replay` takes a sequence of :class:`Alloc` and :class:`Free`
events in program order and returns :class:`AllocatorReplay`. A free takes effect at once
(the allocator's deferral of a block still in use on another stream is not modelled).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Iterable
from dataclasses import dataclass

MIN_BLOCK_BYTES = 512
"""Every request is rounded up to a multiple of this (``kMinBlockSize``)."""
SMALL_REQUEST_BYTES = 1 << 20
"""Largest request of the small pool, and the remainder a large block must exceed to split
(``kSmallSize``)."""
SMALL_SEGMENT_BYTES = 2 << 20
"""Segment the small pool opens (``kSmallBuffer``); an expandable small segment's page."""
MID_SEGMENT_BYTES = 20 << 20
"""Segment opened for a 1-10 MiB request (``kLargeBuffer``); an expandable large segment's
page."""
MIN_OWN_SEGMENT_BYTES = 10 << 20
"""Requests from this size on get a segment of their own size (``kMinLargeAlloc``)."""
SEGMENT_ROUND_BYTES = 2 << 20
"""A segment of its own is rounded up to a multiple of this (``kRoundLarge``)."""

_LIVE, _FREE, _UNMAPPED = 0, 1, 2


@dataclass(frozen=True)
class Alloc:
    """A tensor allocated: ``key`` names it until its :class:`Free`."""

    key: object
    size_bytes: int
    stream: int = 0


@dataclass(frozen=True)
class Free:
    """The tensor ``key`` freed."""

    key: object


@dataclass(frozen=True)
class AllocatorReplay:
    """What a replay ends with.

    Attributes:
        peak_reserved_bytes: the most the allocator ever held from the driver
            (``max_memory_reserved``).
        peak_allocated_bytes: the most the live blocks ever held, rounded sizes
            (``max_memory_allocated``).
        reserved_bytes: held at the end of the trace.
        num_device_allocs: ``cudaMalloc`` calls, or page mappings of expandable segments.
        num_retries: requests that first failed for capacity and were retried after the
            cache was released (``num_alloc_retries``).
    """

    peak_reserved_bytes: int
    peak_allocated_bytes: int
    reserved_bytes: int
    num_device_allocs: int
    num_retries: int

    @property
    def fragmentation_bytes(self) -> int:
        """Reserved peak above the allocated peak."""
        return self.peak_reserved_bytes - self.peak_allocated_bytes


def round_size(size_bytes: int) -> int:
    """A request's size as the allocator serves it: a multiple of 512 bytes, at least 512.

    Examples:
        >>> [round_size(n) for n in (1, 512, 513, 4096)]
        [512, 512, 1024, 4096]
    """
    return max(MIN_BLOCK_BYTES, -(-size_bytes // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES)


def segment_size(size_bytes: int) -> int:
    """Size of the fixed segment opened for a (rounded) request no cached block can serve.

    Examples:
        >>> [segment_size(n) >> 20 for n in (4096, 3 << 20, 100 << 20, (100 << 20) + 1)]
        [2, 20, 100, 102]
    """
    if size_bytes <= SMALL_REQUEST_BYTES:
        return SMALL_SEGMENT_BYTES
    if size_bytes < MIN_OWN_SEGMENT_BYTES:
        return MID_SEGMENT_BYTES
    return -(-size_bytes // SEGMENT_ROUND_BYTES) * SEGMENT_ROUND_BYTES


class _Block:
    """A piece of a segment: live (holding one tensor), free, or (expandable) not mapped."""

    __slots__ = ("address", "next", "pool", "prev", "segment", "size", "state")

    def __init__(self, address: int, size: int, pool: tuple[bool, int], segment: int) -> None:
        self.address = address
        self.size = size
        self.pool = pool  # (small pool?, stream)
        self.segment = segment
        self.state = _FREE
        self.prev: _Block | None = None
        self.next: _Block | None = None


class CachingAllocator:
    """The allocator's state over a replay (see the module docstring for its rules).

    Args:
        capacity_bytes: what the device can give the allocator (its memory less the CUDA
            context and what other allocators hold); None for no limit.
        expandable_segments: PyTorch's ``expandable_segments:True`` setting.
    """

    def __init__(self, capacity_bytes: float | None = None, expandable_segments: bool = False):
        self.capacity_bytes = capacity_bytes
        self.expandable = expandable_segments
        self._free: dict[tuple[bool, int], list[tuple[int, int, _Block]]] = {}
        self._live: dict[object, _Block] = {}
        self._heads: dict[int, _Block] = {}  # first block of each segment
        self._expandable_heads: dict[tuple[bool, int], _Block] = {}
        self._next_address = 0
        self.reserved_bytes = 0
        self.allocated_bytes = 0
        self.peak_reserved_bytes = 0
        self.peak_allocated_bytes = 0
        self.num_device_allocs = 0
        self.num_retries = 0

    # --- the free-block index ---------------------------------------------------------------

    def _cache(self, block: _Block) -> None:
        block.state = _FREE
        insort(self._free.setdefault(block.pool, []), (block.size, block.address, block))

    def _uncache(self, block: _Block) -> None:
        pool = self._free[block.pool]
        del pool[bisect_left(pool, (block.size, block.address))]

    def _best_fit(self, size: int, pool: tuple[bool, int]) -> _Block | None:
        blocks = self._free.get(pool)
        if not blocks:
            return None
        i = bisect_left(blocks, (size, -1))
        return blocks[i][2] if i < len(blocks) else None

    # --- block surgery ----------------------------------------------------------------------

    @staticmethod
    def _split(block: _Block, size: int) -> _Block:
        """Cut ``block`` after ``size`` bytes; return the rest (same state)."""
        rest = _Block(block.address + size, block.size - size, block.pool, block.segment)
        rest.state = block.state
        rest.prev, rest.next = block, block.next
        if block.next is not None:
            block.next.prev = rest
        block.next = rest
        block.size = size
        return rest

    @staticmethod
    def _absorb(block: _Block, after: _Block) -> None:
        """Merge ``after`` (the block right after ``block``) into ``block``."""
        block.size += after.size
        block.next = after.next
        if after.next is not None:
            after.next.prev = block

    def _merge_free(self, block: _Block) -> _Block:
        """Merge a block becoming free with its free neighbours (not yet indexed)."""
        prev, nxt = block.prev, block.next
        if nxt is not None and nxt.state == _FREE:
            self._uncache(nxt)
            self._absorb(block, nxt)
        if prev is not None and prev.state == _FREE:
            self._uncache(prev)
            self._absorb(prev, block)
            block = prev
        return block

    def _reserve(self, size: int) -> None:
        self.reserved_bytes += size
        self.num_device_allocs += 1
        self.peak_reserved_bytes = max(self.peak_reserved_bytes, self.reserved_bytes)

    def _room(self, size: int) -> None:
        """Before taking ``size`` more from the device: release the cache if it would not fit."""
        limit = self.capacity_bytes
        if limit is not None and self.reserved_bytes + size > limit:
            self.num_retries += 1
            self._release_cache()

    # --- fixed segments ---------------------------------------------------------------------

    def _open_segment(self, size: int, pool: tuple[bool, int]) -> _Block:
        total = segment_size(size)
        self._room(total)
        block = _Block(self._next_address, total, pool, self.num_device_allocs)
        self._next_address += total
        self._heads[block.segment] = block
        self._reserve(total)
        return block

    # --- expandable segments ----------------------------------------------------------------

    def _expand(self, size: int, pool: tuple[bool, int]) -> _Block:
        """A free block of at least ``size`` at the lowest address free and unmapped space allow."""
        head = self._expandable_heads.get(pool)
        if head is None:
            # address space of a segment: effectively unbounded next to any request
            head = _Block(self._next_address, 1 << 62, pool, -1 - len(self._expandable_heads))
            head.state = _UNMAPPED
            self._next_address += 1 << 62
            self._expandable_heads[pool] = head
        page = SMALL_SEGMENT_BYTES if pool[0] else MID_SEGMENT_BYTES
        self._room(size)
        start = self._expandable_start(head, size)
        block = start
        if block.state == _UNMAPPED:
            block = self._map(block, min(block.size, size), page)
        while block.size < size:
            nxt = block.next
            assert nxt is not None and nxt.state == _UNMAPPED
            mapped = self._map(nxt, min(size - block.size, nxt.size), page)
            block = mapped
        self._uncache(block)
        return block

    @staticmethod
    def _expandable_start(head: _Block, size: int) -> _Block:
        """The lowest unmapped block (with the free block before it) with room for ``size``."""
        block: _Block | None = head
        while block is not None:
            if block.state == _UNMAPPED:
                prev = block.prev
                start = prev if prev is not None and prev.state == _FREE else block
                room, walk = 0, start
                while walk is not None and walk.state != _LIVE and room < size:
                    room += walk.size
                    walk = walk.next
                if room >= size:
                    return start
            block = block.next
        raise AssertionError("an expandable segment's address space never runs out")

    def _map(self, block: _Block, size: int, page: int) -> _Block:
        """Map the first ``size`` bytes (whole pages) of unmapped ``block``.

        Returns the free block the mapped pages join.
        """
        size = min(block.size, -(-size // page) * page)
        if size < block.size:
            self._split(block, size)  # the rest stays unmapped
        self._reserve(size)
        block.state = _FREE
        block = self._merge_free(block)
        self._cache(block)
        return block

    def _release_cache(self) -> None:
        """Return cached memory to the device (the allocator's out-of-memory retry)."""
        if not self.expandable:
            for segment, head in list(self._heads.items()):
                if head.state == _FREE and head.next is None:
                    self._uncache(head)
                    self.reserved_bytes -= head.size
                    del self._heads[segment]
            return
        for pool, head in self._expandable_heads.items():
            page = SMALL_SEGMENT_BYTES if pool[0] else MID_SEGMENT_BYTES
            block: _Block | None = head
            while block is not None:
                nxt = block.next
                if block.state == _FREE:
                    self._unmap_pages(block, head.address, page)
                block = nxt

    def _unmap_pages(self, block: _Block, base: int, page: int) -> None:
        """Unmap the whole pages inside free ``block`` (the partial pages at its ends stay)."""
        first = base + -(-(block.address - base) // page) * page
        last = base + (block.address + block.size - base) // page * page
        if last <= first:
            return
        self._uncache(block)
        if first > block.address:
            middle = self._split(block, first - block.address)
            self._cache(block)
            block = middle
        if block.address + block.size > last:
            tail = self._split(block, last - block.address)
            self._cache(tail)
        block.state = _UNMAPPED
        self.reserved_bytes -= block.size
        for neighbour in (block.next, block.prev):
            if neighbour is not None and neighbour.state == _UNMAPPED:
                if neighbour is block.next:
                    self._absorb(block, neighbour)
                else:
                    self._absorb(neighbour, block)
                    block = neighbour

    # --- the two calls ----------------------------------------------------------------------

    def malloc(self, key: object, size_bytes: int, stream: int = 0) -> None:
        """Serve a request: best-fit cached block (split if worth it), else device memory."""
        size = round_size(size_bytes)
        small = size <= SMALL_REQUEST_BYTES
        pool = (small, stream)
        block = self._best_fit(size, pool)
        if block is not None:
            self._uncache(block)
        elif self.expandable:
            block = self._expand(size, pool)
        else:
            block = self._open_segment(size, pool)
        remaining = block.size - size
        if self.expandable or small:
            split = remaining >= MIN_BLOCK_BYTES
        else:
            split = remaining > SMALL_REQUEST_BYTES
        if split:
            self._cache(self._split(block, size))
        block.state = _LIVE
        self._live[key] = block
        self.allocated_bytes += block.size
        self.peak_allocated_bytes = max(self.peak_allocated_bytes, self.allocated_bytes)

    def free(self, key: object) -> None:
        """Return a tensor's block to the cache, merged with free neighbours of its segment."""
        block = self._live.pop(key)
        self.allocated_bytes -= block.size
        self._cache(self._merge_free(block))

    def result(self) -> AllocatorReplay:
        """The replay's peaks and counts so far."""
        return AllocatorReplay(
            peak_reserved_bytes=self.peak_reserved_bytes,
            peak_allocated_bytes=self.peak_allocated_bytes,
            reserved_bytes=self.reserved_bytes,
            num_device_allocs=self.num_device_allocs,
            num_retries=self.num_retries,
        )


def replay(
    events: Iterable[Alloc | Free],
    capacity_bytes: float | None = None,
    expandable_segments: bool = False,
) -> AllocatorReplay:
    """Run ``events`` through a fresh caching allocator.

    Examples:
        A freed 100 MiB block serves a later equal request, so nothing more is reserved:

        >>> MiB = 1 << 20
        >>> r = replay([Alloc("a", 100 * MiB), Free("a"), Alloc("b", 100 * MiB)])
        >>> (r.peak_reserved_bytes // MiB, r.num_device_allocs)
        (100, 1)
    """
    allocator = CachingAllocator(capacity_bytes, expandable_segments)
    for event in events:
        if isinstance(event, Alloc):
            allocator.malloc(event.key, event.size_bytes, event.stream)
        else:
            allocator.free(event.key)
    return allocator.result()
