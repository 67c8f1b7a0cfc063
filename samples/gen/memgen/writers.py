"""Writers: CPython pickle (Python path), the C++ Pickler byte layout, JSON."""

import json
import pickle
import struct

# opcodes
PROTO = b"\x80"
STOP = b"."
MARK = b"("
EMPTY_DICT = b"}"
EMPTY_LIST = b"]"
EMPTY_TUPLE = b")"
SETITEMS = b"u"
APPENDS = b"e"
TUPLE = b"t"
TUPLE1 = b"\x85"
TUPLE2 = b"\x86"
TUPLE3 = b"\x87"
NEWTRUE = b"\x88"
NEWFALSE = b"\x89"
NONE = b"N"
BINFLOAT = b"G"
BININT = b"J"
BININT1 = b"K"
BININT2 = b"M"
LONG1 = b"\x8a"
BINUNICODE = b"X"
BINPUT = b"q"
LONG_BINPUT = b"r"
BINGET = b"h"
LONG_BINGET = b"j"


def write_python_pickle(obj, path, protocol=4):
    """torch.cuda.memory._dump_snapshot(): pickle.dump(snapshot, f) (C _pickle)."""
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=protocol)


def to_jsonable(obj):
    if isinstance(obj, dict):
        return {k: to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    return obj


def write_json(obj, path):
    """Snapshot as JSON (MemoryViz.js accepts JSON.parse-able files); tuples become lists."""
    with open(path, "w", encoding="utf-8") as f:
        json.dump(to_jsonable(obj), f, separators=(",", ":"), ensure_ascii=False)
        f.write("\n")


def to_int64(n):
    n &= (1 << 64) - 1
    return n - (1 << 64) if n >= (1 << 63) else n


class CppPickler:
    """Byte layout of torch::jit::Pickler(tag_aggregates=false) as used by
    torch::cuda::_memory_snapshot_pickled() (pickler.cpp):

    * protocol 2, no FRAME, no MEMOIZE;
    * every dict `EMPTY_DICT MARK k v ... SETITEMS`, every list `EMPTY_LIST MARK ... APPENDS`,
      one unbatched run, also when empty;
    * strings always BINUNICODE, memoized by value: first occurrence BINPUT/LONG_BINPUT,
      later BINGET/LONG_BINGET;
    * lists/dicts memoized by pointer only if their use_count > 1: BINPUT written *after*
      the container is complete; later references BINGET;
    * ints in [0,255] BININT1, [0,65535] BININT2, int32 BININT, else LONG1 with 8 bytes
      (values cast to int64 first); doubles BINFLOAT; bools NEWTRUE/NEWFALSE;
    * tuples TUPLE1/2/3 (or MARK..TUPLE), not memoized (fresh IValues).
    """

    def __init__(self, held=()):
        self.held = {id(o) for o in held}
        self._held_refs = list(held)
        self.out = bytearray()
        self.memo_next = 0
        self.str_memo = {}
        self.ptr_memo = {}
        self.refcount = {}

    def _count(self, obj):
        stack = [obj]
        while stack:
            o = stack.pop()
            if isinstance(o, (list, dict)):
                n = self.refcount.get(id(o), 0)
                self.refcount[id(o)] = n + 1
                if n:
                    continue
                if isinstance(o, dict):
                    for k, v in o.items():
                        stack.append(k)
                        stack.append(v)
                else:
                    stack.extend(o)
            elif isinstance(o, tuple):
                stack.extend(o)

    def dumps(self, obj):
        self._count(obj)
        self.out += PROTO + b"\x02"
        self._push(obj)
        self.out += STOP
        return bytes(self.out)

    def _binput(self):
        i = self.memo_next
        if i <= 0xFF:
            self.out += BINPUT + bytes([i])
        else:
            self.out += LONG_BINPUT + struct.pack("<I", i)
        self.memo_next += 1
        return i

    def _binget(self, i):
        if i <= 0xFF:
            self.out += BINGET + bytes([i])
        else:
            self.out += LONG_BINGET + struct.pack("<I", i)

    def _push_int(self, n):
        n = to_int64(n)
        if 0 <= n <= 0xFF:
            self.out += BININT1 + bytes([n])
        elif 0 <= n <= 0xFFFF:
            self.out += BININT2 + struct.pack("<H", n)
        elif -(1 << 31) <= n < (1 << 31):
            self.out += BININT + struct.pack("<i", n)
        else:
            self.out += LONG1 + b"\x08" + struct.pack("<q", n)

    def _push_str(self, s):
        i = self.str_memo.get(s)
        if i is not None:
            self._binget(i)
            return
        b = s.encode("utf-8", "surrogatepass")
        self.out += BINUNICODE + struct.pack("<I", len(b)) + b
        self.str_memo[s] = self._binput()

    def _push(self, v):
        t = type(v)
        if t is bool:
            self.out += NEWTRUE if v else NEWFALSE
        elif t is int:
            self._push_int(v)
        elif t is float:
            self.out += BINFLOAT + struct.pack(">d", v)
        elif t is str:
            self._push_str(v)
        elif v is None:
            self.out += NONE
        elif t is tuple:
            if len(v) == 0:
                self.out += EMPTY_TUPLE
                return
            if len(v) > 3:
                self.out += MARK
            for x in v:
                self._push(x)
            self.out += {1: TUPLE1, 2: TUPLE2, 3: TUPLE3}.get(len(v), TUPLE)
        elif t is list or t is dict:
            memo = self.refcount.get(id(v), 0) > 1 or id(v) in self.held
            if memo:
                i = self.ptr_memo.get(id(v))
                if i is not None:
                    self._binget(i)
                    return
            if t is dict:
                self.out += EMPTY_DICT + MARK
                for k, x in v.items():
                    self._push(k)
                    self._push(x)
                self.out += SETITEMS
            else:
                self.out += EMPTY_LIST + MARK
                for x in v:
                    self._push(x)
                self.out += APPENDS
            if memo:
                self.ptr_memo[id(v)] = self._binput()
        else:
            raise TypeError("cannot pickle %r" % (t,))


def write_cpp_pickle(obj, path, held=()):
    data = CppPickler(held).dumps(obj)
    with open(path, "wb") as f:
        f.write(data)
    return data
