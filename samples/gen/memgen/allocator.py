"""Simulator of the PyTorch CUDA caching allocator.

Follows c10/cuda/CUDACachingAllocator.cpp (pytorch@001074d250, see
/work/shared/docs/snapshot-format.md section 8) closely enough that the trace it
records and the segment/block state it reports look like the real thing:

* round_size / get_allocation_size / should_split / best fit per stream,
* small (<= 1 MiB) and large pools, private pools (CUDA graph capture),
* free-neighbour merging, record_stream pending frees (events),
* cache flush + OOM when a device capacity is exceeded,
* expandable segments (VA reservation mapped in 2 MiB / 20 MiB pages,
  segment_map / segment_unmap, one segment per contiguous mapped range),
* PyTorch 2.0 block `history` chains (trimHistoryBefore + merge concatenation),
* a per-device trace ring buffer (max_entries) with the exact event order.

A "context" (GatheredContext in C++) is represented by the Python object that
will appear as `frames` in the output (normally a list of frame dicts); the
same object is attached to every holder of that context, which gives the
sharing that real snapshots have (block frames is the alloc entry's frames).

Everything is deterministic: no sets or hash-order iteration influence output.
"""

import bisect

kMinBlockSize = 512
kSmallSize = 1 << 20
kSmallBuffer = 2 << 20
kMinLargeAlloc = 10 << 20
kRoundLarge = 2 << 20
kLargeBuffer = 20 << 20
SIZE_MAX = (1 << 64) - 1

# RecordContext levels
NEVER, STATE, ALLOC, ALL = 0, 1, 2, 3

# trace actions
ALLOC_A = "alloc"
FREE_REQUESTED = "free_requested"
FREE_COMPLETED = "free_completed"
SEGMENT_ALLOC = "segment_alloc"
SEGMENT_FREE = "segment_free"
SEGMENT_MAP = "segment_map"
SEGMENT_UNMAP = "segment_unmap"
OOM = "oom"
SNAPSHOT = "snapshot"

EPOCH_START_US = 1732950000000000


class OutOfMemoryError(Exception):
    def __init__(self, device, size, alloc_size, device_free):
        super().__init__("CUDA out of memory. Tried to allocate %d bytes on device %d (%d free)"
                         % (alloc_size, device, device_free))
        self.device = device
        self.size = size
        self.alloc_size = alloc_size
        self.device_free = device_free


class AllocatorConfig:
    """CUDAAllocatorConfig values (reported in allocator_settings)."""

    def __init__(self, expandable_segments=False, max_split_size=SIZE_MAX,
                 roundup_power2_divisions=None, garbage_collection_threshold=0.0,
                 alloc_conf=None, release_lock_on_cudamalloc=False,
                 pinned_num_register_threads=1, pinned_use_cuda_host_register=False,
                 graph_capture_record_stream_reuse=False):
        self.expandable_segments = expandable_segments
        self.max_split_size = max_split_size
        self.roundup_power2_divisions = list(roundup_power2_divisions or [0] * 16)
        assert len(self.roundup_power2_divisions) == 16
        self.garbage_collection_threshold = float(garbage_collection_threshold)
        if alloc_conf is None:
            alloc_conf = "expandable_segments:True" if expandable_segments else ""
        self.alloc_conf = alloc_conf
        self.release_lock_on_cudamalloc = release_lock_on_cudamalloc
        self.pinned_num_register_threads = pinned_num_register_threads
        self.pinned_use_cuda_host_register = pinned_use_cuda_host_register
        self.graph_capture_record_stream_reuse = graph_capture_record_stream_reuse

    def divisions_for(self, size):
        # CUDAAllocatorConfig::roundup_power2_divisions(size): 16 buckets 1 MiB .. 32 GiB
        log_size = size.bit_length() - 1
        interval_start = 20
        index = log_size - interval_start if log_size > interval_start else 0
        index = min(index, 15)
        return self.roundup_power2_divisions[index]


def roundup_power2_next_division(size, divisions):
    if size & (size - 1) == 0:
        return size
    assert divisions >= 2
    power2_floor = 1 << (size.bit_length() - 1)
    power2_division = power2_floor >> (divisions.bit_length() - 1)
    if power2_division == 0:
        return power2_floor << 1
    round_size_floor = size & ~(power2_division - 1)
    return size if round_size_floor == size else round_size_floor + power2_division


def round_size(size, config=None):
    if size < kMinBlockSize:
        return kMinBlockSize
    divisions = config.divisions_for(size) if config is not None else 0
    if divisions > 1 and size > kMinBlockSize * divisions:
        return roundup_power2_next_division(size, divisions)
    return kMinBlockSize * ((size + kMinBlockSize - 1) // kMinBlockSize)


def get_allocation_size(size):
    if size <= kSmallSize:
        return kSmallBuffer
    if size < kMinLargeAlloc:
        return kLargeBuffer
    return kRoundLarge * ((size + kRoundLarge - 1) // kRoundLarge)


class Clock:
    """Wall clock in microseconds since the epoch; non-decreasing."""

    def __init__(self, rng, start=EPOCH_START_US):
        self.rng = rng
        self.t = start

    def advance(self, lo, hi=None):
        self.t += lo if hi is None else self.rng.randint(lo, hi)

    def stamp(self):
        t = self.t
        self.t += self.rng.choice((0, 0, 1, 1, 2))
        return t


class RingBuffer:
    """TraceEntryRingBuffer: oldest entries are overwritten past max_entries."""

    def __init__(self, max_entries=SIZE_MAX):
        self.max_entries = max(1, max_entries)
        self.buf = []
        self.next = 0

    def insert(self, te):
        if len(self.buf) < self.max_entries:
            self.buf.append(te)
        else:
            self.buf[self.next] = te
            self.next += 1
            if self.next == self.max_entries:
                self.next = 0

    def entries(self):
        return self.buf[self.next:] + self.buf[:self.next]

    def clear(self):
        self.buf = []
        self.next = 0


class TraceEntry:
    __slots__ = ("action", "addr", "size", "stream", "time_us", "ctx", "device", "extra")

    def __init__(self, action, addr, size, stream, time_us, ctx, device, extra=None):
        self.action = action
        self.addr = addr
        self.size = size
        self.stream = stream
        self.time_us = time_us
        self.ctx = ctx
        self.device = device
        self.extra = extra


class AddressSpace:
    """First-fit virtual address allocator (cudaMalloc / cuMemAddressReserve)."""

    def __init__(self, base, limit, align=2 << 20):
        assert base % align == 0
        self.align = align
        self.free = [[base, limit]]  # sorted [start, size]

    def alloc(self, size):
        size = (size + self.align - 1) // self.align * self.align
        for i, (start, n) in enumerate(self.free):
            if n >= size:
                if n == size:
                    del self.free[i]
                else:
                    self.free[i] = [start + size, n - size]
                return start
        raise MemoryError("address space exhausted")

    def release(self, addr, size):
        size = (size + self.align - 1) // self.align * self.align
        starts = [f[0] for f in self.free]
        i = bisect.bisect_left(starts, addr)
        self.free.insert(i, [addr, size])
        # coalesce with next, then prev
        if i + 1 < len(self.free) and self.free[i][0] + self.free[i][1] == self.free[i + 1][0]:
            self.free[i][1] += self.free[i + 1][1]
            del self.free[i + 1]
        if i > 0 and self.free[i - 1][0] + self.free[i - 1][1] == self.free[i][0]:
            self.free[i - 1][1] += self.free[i][1]
            del self.free[i]


class Block:
    __slots__ = ("device", "stream", "stream_uses", "size", "requested_size", "pool", "ptr",
                 "allocated", "mapped", "prev", "next", "event_count", "ctx_alloc", "ctx_seg",
                 "es", "history", "serial")

    _serial = 0

    def __init__(self, device, stream, size, pool, ptr):
        self.device = device
        self.stream = stream
        self.stream_uses = []
        self.size = size
        self.requested_size = 0
        self.pool = pool
        self.ptr = ptr
        self.allocated = False
        self.mapped = True
        self.prev = None
        self.next = None
        self.event_count = 0
        self.ctx_alloc = None
        self.ctx_seg = None
        self.es = None
        self.history = []  # PyTorch 2.0 HistoryChain, newest/lowest address first
        Block._serial += 1
        self.serial = Block._serial

    def is_split(self):
        return self.prev is not None or self.next is not None

    def splice(self, before, after):
        if before is not None:
            assert before.next is after
            before.next = self
        self.prev = before
        if after is not None:
            assert after.prev is before
            after.prev = self
        self.next = after


class SortedBlocks:
    """std::set<Block*> with BlockComparatorSize (stream, size, ptr) or Address (stream, ptr)."""

    __slots__ = ("keys", "map", "by_size")

    def __init__(self, by_size=True):
        self.keys = []
        self.map = {}
        self.by_size = by_size

    def key(self, b):
        return (b.stream, b.size, b.ptr) if self.by_size else (b.stream, b.ptr)

    def add(self, b):
        k = self.key(b)
        assert k not in self.map, k
        bisect.insort(self.keys, k)
        self.map[k] = b

    def remove(self, b):
        k = self.key(b)
        i = bisect.bisect_left(self.keys, k)
        assert i < len(self.keys) and self.keys[i] == k and self.map[k] is b, k
        del self.keys[i]
        del self.map[k]
        return 1

    def contains(self, b):
        return self.map.get(self.key(b)) is b

    def lower_bound(self, k):
        return bisect.bisect_left(self.keys, k)

    def at(self, i):
        return self.map[self.keys[i]]

    def __len__(self):
        return len(self.keys)

    def blocks(self):
        return [self.map[k] for k in self.keys]


class BlockPool:
    def __init__(self, small, owner=None):
        self.is_small = small
        self.owner = owner  # private pool id tuple, or None for the default pools
        self.blocks = SortedBlocks(by_size=True)
        self.unmapped = SortedBlocks(by_size=False)


class ExpandableSegment:
    def __init__(self, device, stream, base, address_space_size, segment_size):
        self.device = device
        self.stream = stream
        self.segment_size = segment_size
        self.max_handles = (address_space_size + segment_size - 1) // segment_size
        self.base = base
        self.handles = []  # bool per page

    def size(self):
        return self.max_handles * self.segment_size

    def _num(self, n):
        return (n + self.segment_size - 1) // self.segment_size

    def map(self, dev, ptr, size):
        begin = (ptr - self.base) // self.segment_size
        end = self._num(ptr + size - self.base)
        assert self.base + begin * self.segment_size == ptr
        if begin == end:
            return ptr, 0
        need = (end - begin) * self.segment_size
        if not dev.physical_available(need):
            return ptr, 0  # cuMemCreate failed: handles created in this call released
        while end > len(self.handles):
            self.handles.append(False)
        for i in range(begin, end):
            assert not self.handles[i]
            self.handles[i] = True
        return self.base + begin * self.segment_size, need

    def unmap(self, ptr, size):
        begin = self._num(ptr - self.base)
        end = (ptr + size - self.base) // self.segment_size
        if begin >= end:
            return ptr, 0
        for i in range(begin, end):
            assert self.handles[i]
            self.handles[i] = False
        while self.handles and not self.handles[-1]:
            self.handles.pop()
        return self.base + begin * self.segment_size, (end - begin) * self.segment_size


class AllocParams:
    __slots__ = ("size", "stream", "pool", "alloc_size", "block", "err")

    def __init__(self, size, stream, pool, alloc_size):
        self.size = size
        self.stream = stream
        self.pool = pool
        self.alloc_size = alloc_size
        self.block = None
        self.err = False


class SegmentInfo:
    __slots__ = ("device", "address", "total_size", "allocated_size", "active_size",
                 "requested_size", "stream", "is_large", "is_expandable", "ctx", "pool_id", "blocks")


class BlockInfo:
    __slots__ = ("size", "requested_size", "allocated", "active", "ctx", "history")


class DeviceAllocator:
    """DeviceCachingAllocator for one device."""

    def __init__(self, device, config, clock, capacity=80 << 30, driver_overhead=None,
                 va_base=None, es_base=None, record_context=ALL, max_entries=SIZE_MAX,
                 record_history=True, legacy_history=False, record_alloc_trace=True):
        self.device = device
        self.config = config
        self.clock = clock
        self.capacity = capacity
        # memory not available to PyTorch (CUDA context, other processes)
        self.driver_overhead = (capacity // 50) if driver_overhead is None else driver_overhead
        self.large = BlockPool(False)
        self.small = BlockPool(True)
        self.private = {}  # pool id -> (small BlockPool, large BlockPool), insertion ordered
        self.capture = None  # (pool id, stream) while a graph capture is underway
        self.active = {}  # serial -> Block, insertion ordered
        self.events = {}  # stream -> [[block, ready], ...] insertion ordered
        self.reserved = 0  # total_allocated_memory
        self.es_list = []
        if va_base is None:
            va_base = 0x7F4C00000000 + device * 0x1000000000
        if es_base is None:
            es_base = 0x7E2000000000 + device * 0x40000000000
        self.va = AddressSpace(va_base, 1 << 40)
        self.es_va = AddressSpace(es_base, 1 << 44)
        self.record_history = record_history
        self.record_context = record_context if record_history else NEVER
        self.trace = RingBuffer(max_entries)
        self.legacy_history = legacy_history
        self.record_alloc_trace = record_alloc_trace
        self.oom_count = 0

    # ------------------------------------------------------------------ helpers
    def physical_available(self, n):
        return self.reserved + n + self.driver_overhead <= self.capacity

    def device_free(self):
        return self.capacity - self.driver_overhead - self.reserved

    def gather(self, level, ctx):
        """maybeGatherContext(level)."""
        return ctx if self.record_context >= level else None

    def record_trace(self, action, addr, size, stream, ctx):
        if not self.record_history:
            return
        te = TraceEntry(action, addr, size, stream, self.clock.stamp(),
                        ctx if self.record_context >= ALLOC else None, self.device)
        self.trace.insert(te)
        return te

    def set_history(self, enabled=True, record_context=ALL, max_entries=None, clear=False):
        """_record_memory_history(...): changes the recording settings (buffer kept unless clear)."""
        self.record_history = enabled
        self.record_context = record_context if enabled else NEVER
        if max_entries is not None:
            self.trace.max_entries = max(1, max_entries)
        if clear or not enabled:
            self.trace.clear()

    # ------------------------------------------------------------------ public API
    def malloc(self, orig_size, stream=0, ctx=None):
        context = self.gather(STATE, ctx)
        if self.capture is None:
            self.process_events(context)
        size = round_size(orig_size, self.config)
        pool = self.get_pool(size, stream)
        alloc_size = get_allocation_size(size)
        p = AllocParams(size, stream, pool, alloc_size)
        found = self.get_free_block(p)
        if not found:
            found = (self.alloc_block(p, False, context)
                     or (self.release_available_cached_blocks(p, context)
                         and self.alloc_block(p, False, context))
                     or (self.capture is None and self.release_cached_blocks(context)
                         and self.alloc_block(p, True, context)))
        if not found:
            device_free = self.device_free()
            self.record_trace(OOM, device_free, size, stream, context)
            self.oom_count += 1
            raise OutOfMemoryError(self.device, size, alloc_size, device_free)
        split = self.should_split(p.block, size)
        return self.alloc_found_block(p, orig_size, context, split)

    def free(self, block, ctx=None):
        context = self.gather(ALL, ctx)
        assert block.allocated
        block.allocated = False
        self.record_trace(FREE_REQUESTED, block.ptr, block.requested_size, block.stream,
                          context if context is not None else block.ctx_alloc)
        if block.stream_uses:
            assert self.capture is None, "deferred events during capture not modelled"
            self.insert_events(block)
        else:
            self.free_block(block, context)

    def record_stream(self, block, stream):
        if stream == block.stream:
            return
        if stream not in block.stream_uses:
            block.stream_uses.append(stream)

    def stream_work_done(self, stream):
        """All work queued so far on `stream` finished: its recorded events become ready."""
        for ev in self.events.get(stream, []):
            ev[1] = True

    def empty_cache(self, ctx=None):
        context = self.gather(ALL, ctx)
        self.release_cached_blocks(context)

    def begin_allocate_to_pool(self, pool_id, stream):
        if pool_id not in self.private:
            self.private[pool_id] = (BlockPool(True, pool_id), BlockPool(False, pool_id))
        self.capture = (pool_id, stream)

    def end_allocate_to_pool(self):
        self.capture = None

    # ------------------------------------------------------------------ internals
    def get_pool(self, size, stream):
        if self.capture is not None and self.capture[1] == stream:
            small, large = self.private[self.capture[0]]
            return small if size <= kSmallSize else large
        return self.small if size <= kSmallSize else self.large

    def should_split(self, block, size):
        remaining = block.size - size
        if block.pool.is_small or self.config.expandable_segments:
            return remaining >= kMinBlockSize
        return size < self.config.max_split_size and remaining > kSmallSize

    def get_free_block(self, p):
        blocks = p.pool.blocks
        i = blocks.lower_bound((p.stream, p.size, 0))
        if i == len(blocks) or blocks.keys[i][0] != p.stream:
            return False
        b = blocks.at(i)
        if b.es is not None:
            if self.config.expandable_segments:
                def expandable_size(x):
                    return x.size + (x.next.size if (x.next is not None and not x.next.mapped) else 0)
                j = i + 1
                while (b.es is not None and j < len(blocks) and blocks.keys[j][0] == p.stream
                       and expandable_size(blocks.at(j)) < expandable_size(b)):
                    i = j
                    b = blocks.at(i)
                    j += 1
            else:
                i += 1
                while i < len(blocks) and blocks.at(i).es is not None and blocks.keys[i][0] == p.stream:
                    i += 1
                if i == len(blocks) or blocks.keys[i][0] != p.stream:
                    return False
                b = blocks.at(i)
        mss = self.config.max_split_size
        if p.size < mss and b.size >= mss:
            return False
        if p.size >= mss and b.size >= p.size + kLargeBuffer:
            return False
        blocks.remove(b)
        p.block = b
        return True

    def alloc_block(self, p, is_retry, ctx):
        size = p.alloc_size
        if self.config.expandable_segments:
            p.block = self.try_allocate_expandable_block(p.stream, p.pool, p.size, ctx)
            p.err = p.block is None
            return p.block is not None
        if not self.physical_available(size):
            p.err = True
            return False
        ptr = self.va.alloc(size)
        self.reserved += size
        b = Block(self.device, p.stream, size, p.pool, ptr)
        self.record_trace(SEGMENT_ALLOC, ptr, size, p.stream, ctx)
        b.ctx_seg = ctx
        p.block = b
        return True

    def release_available_cached_blocks(self, p, ctx):
        mss = self.config.max_split_size
        if mss == SIZE_MAX:
            return False
        blocks = p.pool.blocks
        key_size = mss if p.size < mss else p.size
        i = blocks.lower_bound((p.stream, key_size, 0))
        if i == len(blocks) or blocks.keys[i][0] != p.stream:
            if i == 0:
                return False
            total = 0
            i -= 1
            while total < key_size and i >= 0 and blocks.keys[i][1] >= mss and blocks.keys[i][0] == p.stream:
                b = blocks.at(i)
                total += b.size
                self.release_block(b, ctx)
                i -= 1
            return total >= key_size
        self.release_block(blocks.at(i), ctx)
        return True

    def release_cached_blocks(self, ctx):
        self.synchronize_and_free_events(ctx)
        self.release_blocks(self.large, ctx)
        self.release_blocks(self.small, ctx)
        return True

    def release_blocks(self, pool, ctx):
        to_unmap = []
        for b in pool.blocks.blocks():
            if b.es is not None:
                to_unmap.append(b)
            elif b.prev is None and b.next is None:
                self.release_block(b, ctx)
        for b in to_unmap:
            self.unmap_block(b, ctx)
            if b.prev is None and b.next is None:
                self.release_expandable_segment(b)

    def release_block(self, b, ctx):
        assert b.es is None
        self.record_trace(SEGMENT_FREE, b.ptr, b.size, b.stream, ctx if ctx is not None else b.ctx_seg)
        self.va.release(b.ptr, b.size)
        self.reserved -= b.size
        b.pool.blocks.remove(b)

    def release_expandable_segment(self, b):
        assert b.size == b.es.size() and not b.mapped
        self.es_list.remove(b.es)
        b.pool.unmapped.remove(b)
        self.es_va.release(b.es.base, b.es.size())

    def find_expandable_block(self, stream, pool, size):
        def allocatable(x):
            return x is not None and not x.allocated and x.event_count == 0 and not x.stream_uses

        def has_space(x):
            n = 0
            while n < size and allocatable(x):
                n += x.size
                x = x.next
            return n >= size

        um = pool.unmapped
        i = um.lower_bound((stream, -1))
        while i < len(um) and um.keys[i][0] == stream:
            c = um.at(i)
            if allocatable(c.prev):
                c = c.prev
            if has_space(c):
                return c
            i += 1
        segment_size = kSmallBuffer if pool.is_small else kLargeBuffer
        address_space_size = self.capacity + self.capacity // 8
        n_pages = (address_space_size + segment_size - 1) // segment_size
        base = self.es_va.alloc(n_pages * segment_size)
        es = ExpandableSegment(self.device, stream, base, address_space_size, segment_size)
        self.es_list.append(es)
        c = Block(self.device, stream, es.size(), pool, base)
        c.mapped = False
        c.es = es
        pool.unmapped.add(c)
        return c

    def map_block(self, to_map, size, ctx):
        assert not to_map.mapped and size <= to_map.size
        assert to_map.ctx_alloc is None
        ptr, msize = to_map.es.map(self, to_map.ptr, size)
        if msize == 0:
            return False
        assert ptr == to_map.ptr and msize >= size
        pool = to_map.pool
        pool.unmapped.remove(to_map)
        to_map.mapped = True
        if msize < to_map.size:
            rem = Block(self.device, to_map.stream, to_map.size - msize, pool, to_map.ptr + msize)
            rem.mapped = False
            rem.es = to_map.es
            rem.splice(to_map, to_map.next)
            pool.unmapped.add(rem)
            to_map.size = msize
        self.try_merge_blocks(to_map, to_map.prev, pool)
        self.try_merge_blocks(to_map, to_map.next, pool)
        pool.blocks.add(to_map)
        self.reserved += msize
        self.record_trace(SEGMENT_MAP, ptr, msize, to_map.stream, ctx)
        if to_map.prev is None and to_map.ctx_seg is None:
            to_map.ctx_seg = ctx
        return True

    def try_allocate_expandable_block(self, stream, pool, size, ctx):
        c = self.find_expandable_block(stream, pool, size)
        if not c.mapped and not self.map_block(c, min(c.size, size), ctx):
            return None
        assert c.mapped
        while c.size < size:
            remaining = size - c.size
            nc = c.next
            if not self.map_block(nc, min(remaining, nc.size), ctx):
                return None
            c = nc
        pool.blocks.remove(c)
        return c

    def unmap_block(self, b, ctx):
        ptr, usize = b.es.unmap(b.ptr, b.size)
        if usize == 0:
            return
        pool = b.pool
        pool.blocks.remove(b)
        before = ptr - b.ptr
        if before > 0:
            bf = Block(self.device, b.stream, before, pool, b.ptr)
            bf.es = b.es
            bf.splice(b.prev, b)
            pool.blocks.add(bf)
        after = b.size - (before + usize)
        if after > 0:
            af = Block(self.device, b.stream, after, pool, ptr + usize)
            af.es = b.es
            af.splice(b, b.next)
            pool.blocks.add(af)
        b.ptr = ptr
        b.size = usize
        b.mapped = False
        self.try_merge_blocks(b, b.prev, pool)
        self.try_merge_blocks(b, b.next, pool)
        pool.unmapped.add(b)
        self.reserved -= usize
        self.record_trace(SEGMENT_UNMAP, ptr, usize, b.stream, ctx if ctx is not None else b.ctx_seg)

    def try_merge_blocks(self, dst, src, pool):
        if (src is None or src.allocated or src.event_count > 0 or src.stream_uses
                or dst.mapped != src.mapped):
            return 0
        assert dst.is_split() and src.is_split()
        if dst.prev is src:  # [src dst]
            dst.ptr = src.ptr
            dst.prev = src.prev
            if dst.prev is not None:
                dst.prev.next = dst
            dst.ctx_seg = src.ctx_seg
            if self.legacy_history:
                dst.history = src.history + dst.history
        else:  # [dst src]
            dst.next = src.next
            if dst.next is not None:
                dst.next.prev = dst
            if self.legacy_history:
                dst.history = dst.history + src.history
        subsumed = src.size
        dst.size += subsumed
        if src.mapped:
            pool.blocks.remove(src)
        else:
            pool.unmapped.remove(src)
        return subsumed

    @staticmethod
    def trim_history_before(block, point):
        h = block.history
        n = 0
        while n < len(h) and h[n][0] < point:
            n += 1
        if n:
            block.history = h[n:]

    def alloc_found_block(self, p, orig_size, ctx, split):
        size = p.size
        pool = p.pool
        block = p.block
        if split:
            remaining = block
            block = Block(self.device, p.stream, size, pool, remaining.ptr)
            block.es = remaining.es
            block.prev = remaining.prev
            if block.prev is not None:
                block.prev.next = block
            block.next = remaining
            remaining.prev = block
            remaining.ptr += size
            remaining.size -= size
            pool.blocks.add(remaining)
            if self.legacy_history:
                self.trim_history_before(remaining, block.ptr + size)
        block.allocated = True
        block.requested_size = orig_size
        block.ctx_alloc = ctx
        if self.legacy_history:
            self.trim_history_before(block, block.ptr + size)
            block.history = [(block.ptr, orig_size, ctx)] + block.history
        if self.record_alloc_trace:
            self.record_trace(ALLOC_A, block.ptr, orig_size, block.stream, ctx)
        self.active[block.serial] = block
        return block

    def free_block(self, block, ctx):
        assert not block.allocated and block.event_count == 0 and not block.stream_uses
        if self.record_alloc_trace:
            self.record_trace(FREE_COMPLETED, block.ptr, block.requested_size, block.stream,
                              ctx if ctx is not None else block.ctx_alloc)
        block.ctx_alloc = None
        pool = block.pool
        for cand in (block.prev, block.next):
            self.try_merge_blocks(block, cand, pool)
        del self.active[block.serial]
        pool.blocks.add(block)

    def insert_events(self, block):
        streams = block.stream_uses
        block.stream_uses = []
        for s in streams:
            block.event_count += 1
            self.events.setdefault(s, []).append([block, False])

    def process_events(self, ctx):
        for s in list(self.events):
            q = self.events[s]
            while q and q[0][1]:
                block = q.pop(0)[0]
                block.event_count -= 1
                if block.event_count == 0:
                    self.free_block(block, ctx)
            if not q:
                del self.events[s]

    def synchronize_and_free_events(self, ctx):
        for s in list(self.events):
            for ev in self.events[s]:
                block = ev[0]
                block.event_count -= 1
                if block.event_count == 0:
                    self.free_block(block, ctx)
        self.events = {}

    def all_pools(self):
        pools = [self.small, self.large]
        for small, large in self.private.values():
            pools.append(small)
            pools.append(large)
        return pools

    def snapshot(self, record=True):
        """DeviceCachingAllocator::snapshot(): one SegmentInfo per contiguous mapped range."""
        all_blocks = []
        for pool in self.all_pools():
            all_blocks.extend(pool.blocks.blocks())
        all_blocks.extend(self.active.values())
        result = []
        total_active = 0
        for head in all_blocks:
            if head.prev is not None and head.prev.mapped:
                continue
            si = SegmentInfo()
            si.device = self.device
            si.address = head.ptr
            si.stream = head.stream
            si.is_large = not head.pool.is_small
            si.is_expandable = head.es is not None
            si.ctx = head.ctx_seg
            si.pool_id = head.pool.owner if head.pool.owner is not None else (0, 0)
            si.total_size = si.allocated_size = si.active_size = si.requested_size = 0
            si.blocks = []
            b = head
            while b is not None and b.mapped:
                bi = BlockInfo()
                bi.size = b.size
                bi.requested_size = b.requested_size
                bi.allocated = b.allocated
                bi.active = b.allocated or b.event_count > 0 or bool(b.stream_uses)
                bi.ctx = b.ctx_alloc
                bi.history = list(b.history)
                si.total_size += b.size
                if bi.allocated:
                    si.allocated_size += b.size
                if bi.active:
                    si.active_size += b.size
                    si.requested_size += b.requested_size
                si.blocks.append(bi)
                b = b.next
            total_active += si.active_size
            result.append(si)
        result.sort(key=lambda s: s.address)
        if record:
            self.record_trace(SNAPSHOT, 0, total_active, 0, None)
        return result

    # convenience for scenarios ------------------------------------------------
    def memory_allocated(self):
        return sum(b.size for b in self.active.values() if b.allocated)

    def memory_reserved(self):
        return self.reserved


class Allocator:
    """NativeCachingAllocator: one DeviceAllocator per visible device."""

    def __init__(self, n_devices, config, clock, **kw):
        self.config = config
        self.clock = clock
        per_dev = kw.pop("per_device", {})
        self.devices = []
        for d in range(n_devices):
            args = dict(kw)
            args.update(per_dev.get(d, {}))
            self.devices.append(DeviceAllocator(d, config, clock, **args))
        self.annotations = []  # (stage, name, device, time_us)

    def __getitem__(self, d):
        return self.devices[d]

    def annotate(self, stage, name, device=0):
        self.annotations.append((stage, name, device, self.clock.stamp()))

    def snapshot(self):
        """NativeCachingAllocator::snapshot(): per device, trace first, then segments."""
        traces = []
        segments = []
        for dev in self.devices:
            traces.append(dev.trace.entries())
            segments.extend(dev.snapshot())
        return segments, traces
