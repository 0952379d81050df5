import pickle, sys, copy
import gpu_engine
from gpu_engine.kernels import lazy_cuda
from numba import cuda
print("standin:", cuda)
@cuda.jit
def k(a):
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[i] += 1
print(type(k))
holder = {"k": k}
try:
    s = pickle.dumps(k)
    print("pickled", len(s), "cuda loaded:", lazy_cuda.is_loaded())
    try:
        k2 = pickle.loads(s)
        print("unpickled", k2)
    except RecursionError as e:
        print("UNPICKLE RecursionError")
    except Exception as e:
        print("UNPICKLE", type(e).__name__, e)
except Exception as e:
    print("PICKLE", type(e).__name__, str(e)[:200], "cuda loaded:", lazy_cuda.is_loaded())
try:
    c = copy.copy(k); print("copy ok", c)
except BaseException as e:
    print("COPY", type(e).__name__, str(e)[:200])
