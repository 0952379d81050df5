import numpy as np, pyarrow as pa, datetime
from gpu_engine.columnar.arrow_numpy import numpy_values, numpy_validity, has_numpy_layout
from gpu_engine.columnar.column import Column
from gpu_engine.device import get_device
dev = get_device("cpu")
probes = bad = 0
def cmp(arr, label):
    global probes, bad
    probes += 1
    try:
        v = numpy_validity(arr); ev = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), bool)
        assert np.array_equal(v, ev), ("validity", v, ev)
        if has_numpy_layout(arr.type):
            got = numpy_values(arr)
            exp = arr.to_numpy(zero_copy_only=False)
            if exp.dtype.kind in "mM": exp = exp.view(np.int64) if exp.dtype.itemsize == 8 else exp
            m = ev
            if exp.dtype.kind == "f":
                assert np.allclose(got[m].astype(float), exp[m].astype(float), equal_nan=True), (got, exp)
            else:
                assert np.array_equal(got[m].astype(np.int64) if got.dtype.kind != "b" else got[m], exp[m].astype(np.int64) if exp.dtype.kind != "b" else exp[m]), (got, exp)
            assert not got.flags.writeable or arr.type == pa.bool_()
        col = Column.from_arrow(arr, dev)
        back = col.to_arrow(dev)
        assert back.to_pylist() == arr.to_pylist() or label.startswith("nolist"), (back.to_pylist()[:5], arr.to_pylist()[:5])
    except Exception as e:
        bad += 1; print("BAD", label, type(e).__name__, str(e)[:300])
base = {
 "i64": pa.array([1, None, 3, 4, None, 6, 7, 8, 9, 10, 11], pa.int64()),
 "f16": pa.array(np.array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11], np.float16)),
 "bool": pa.array([True, None, False, True, True, None, False, False, True, True, False]),
 "t32ms": pa.array([1, None, 3, 4, 5, 6, 7, 8, 9, 10, 11], pa.time32("ms")),
 "t64ns": pa.array([1000, None, 3000, 4000, 5, 6, 7, 8, 9, 10, 11], pa.time64("ns")),
 "tsns_tz": pa.array([1, None, 3, 4, 5, 6, 7, 8, 9, 10, 11], pa.timestamp("ns", "UTC")),
 "ts_s": pa.array([1, None, 3, 4, 5, 6, 7, 8, 9, 10, 11], pa.timestamp("s")),
 "date32": pa.array([1, None, 3, 4, 5, 6, 7, 8, 9, 10, 11], pa.date32()),
 "date64": pa.array([86400000, None, 3*86400000, 4, 5, 6, 7, 8, 9, 10, 11], pa.date64()),
 "dec": pa.array([1, None, 3, 4, 5, 6, 7, 8, 9, 10, 11], pa.int64()).cast(pa.decimal128(22, 2)),
 "dec38": pa.array([10**30, None, -3, 4, 5, 6, 7, 8, 9, 10, 11], pa.decimal128(38, 0)),
 "str": pa.array(["a", None, "", "ddd", "e", None, "g", "h", "", "j", "k"]),
 "lstr": pa.array(["a", None, "", "ddd", "e", None, "g", "h", "", "j", "k"], pa.large_string()),
 "lbin": pa.array([b"a", None, b"", b"ddd", b"e", None, b"g", b"h", b"", b"j", b"k"], pa.large_binary()),
 "dict": pa.array(["a", None, "", "ddd", "e", None, "g", "h", "", "j", "a"]).dictionary_encode(),
 "dict8": pa.DictionaryArray.from_arrays(pa.array([0, None, 1, 2, 0, 1, None, 2, 0, 1, 2], pa.int8()), pa.array(["x", None, "zz"])),
 "dict_int": pa.array([1, None, 3, 1, 3, 6, 7, 8, 9, 10, 11]).dictionary_encode(),
 "u8": pa.array([1, None, 255, 4, 5, 6, 7, 8, 9, 10, 11], pa.uint8()),
 "dur": pa.array([1, None, 3, 4, 5, 6, 7, 8, 9, 10, 11], pa.duration("ms")),
}
for name, a in base.items():
    for off, ln in [(0, 11), (3, 5), (9, 2), (5, 0), (1, 10), (10, 1)]:
        cmp(a.slice(off, ln), f"{name}[{off}:{off+ln}]")
    cmp(pa.chunked_array([a.slice(1, 4), a.slice(7, 3)]), f"{name} chunked")
    cmp(pa.chunked_array([], a.type), f"{name} empty chunked")
    cmp(pa.nulls(5, a.type), f"{name} nulls")
    cmp(pa.nulls(9, a.type).slice(3, 4), f"{name} nulls sliced")
# odd-sized buffers (a producer's exact-size or oversized buffers)
arr = pa.Array.from_buffers(pa.int64(), 2, [None, pa.py_buffer(b"\x01" + b"\x00" * 7 + b"\x02" + b"\x00" * 8)])
cmp(arr, "odd buffer int64")
arr = pa.Array.from_buffers(pa.int32(), 2, [None, pa.py_buffer(np.array([5, 6, 7], np.int32).tobytes() + b"\x00")], offset=1)
cmp(arr, "odd buffer int32 offset")
print("probes", probes, "bad", bad)
