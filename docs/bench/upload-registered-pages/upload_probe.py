#!/usr/bin/env python3
"""Untracked probe (session 32): H2D from a page-cached file mapping, staged through pinned buffers (Spindle's
upload today) against the mapping's own pages registered with cudaHostRegister(READ_ONLY) and copied by DMA."""
import ctypes, glob, mmap, os, sys, threading, time
GB = 1 << 30
path, size_gb, threads = "/tmp/probe.bin", int(sys.argv[1]) if len(sys.argv) > 1 else 16, 8
import subprocess
lib = subprocess.run("find / -name 'libcudart.so*' -not -path '/proc/*' 2>/dev/null | sort | head -1", shell=True, capture_output=True, text=True).stdout.strip()
rt = ctypes.CDLL(lib); print("cudart", lib)
def ok(rc, what):
    if rc != 0: raise RuntimeError(f"{what}: cuda error {rc}")
size = size_gb * GB
if not os.path.exists(path) or os.path.getsize(path) != size:
    t = time.time()
    with open(path, "wb") as f:
        block = os.urandom(64 << 20)
        for _ in range(size // len(block)): f.write(block)
    print(f"wrote {size_gb} GB in {time.time()-t:.1f} s")
fd = os.open(path, os.O_RDONLY)
m = mmap.mmap(fd, size, prot=mmap.PROT_READ)
# the mapping's address: through a ctypes view of the read-only buffer is refused; use libc mmap instead
libc = ctypes.CDLL("libc.so.6", use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
addr = libc.mmap(None, size, 1, 1, fd, 0)  # PROT_READ, MAP_SHARED
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
dev = ctypes.c_void_p(); ok(rt.cudaMalloc(ctypes.byref(dev), ctypes.c_size_t(size)), "malloc")
rt.cudaMemcpyAsync.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p]
rt.cudaHostRegister.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_uint]
rt.cudaHostUnregister.argtypes = [ctypes.c_void_p]
rt.cudaHostAlloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_uint]
rt.cudaStreamSynchronize.argtypes = [ctypes.c_void_p]

def run(name, work, chunk):
    n = size // chunk
    nxt = [0]; lock = threading.Lock(); spent = {"register": 0.0, "touch": 0.0}
    def worker():
        s = [ctypes.c_void_p(), ctypes.c_void_p()]
        for x in s: ok(rt.cudaStreamCreate(ctypes.byref(x)), "stream")
        bufs = [ctypes.c_void_p(), ctypes.c_void_p()]
        if work == "staged":
            for b in bufs: ok(rt.cudaHostAlloc(ctypes.byref(b), chunk, 0), "hostalloc")
        held = [None, None]; k = 0
        while True:
            with lock:
                i = nxt[0]; nxt[0] += 1
            if i >= n: break
            src = addr + i * chunk
            ok(rt.cudaStreamSynchronize(s[k]), "sync")
            if held[k] is not None:
                ok(rt.cudaHostUnregister(ctypes.c_void_p(held[k])), "unregister"); held[k] = None
            if work == "staged":
                t = time.time(); libc.madvise(ctypes.c_void_p(src), chunk, 3); spent["touch"] += time.time() - t
                ctypes.memmove(bufs[k], src, chunk)
                ok(rt.cudaMemcpyAsync(ctypes.c_void_p(dev.value + i * chunk), bufs[k], chunk, 1, s[k]), "copy")
            else:
                t = time.time(); ok(rt.cudaHostRegister(ctypes.c_void_p(src), chunk, 8), "register"); spent["register"] += time.time() - t
                held[k] = src
                ok(rt.cudaMemcpyAsync(ctypes.c_void_p(dev.value + i * chunk), ctypes.c_void_p(src), chunk, 1, s[k]), "copy")
            k ^= 1
        for j in range(2):
            ok(rt.cudaStreamSynchronize(s[j]), "sync")
            if held[j] is not None: ok(rt.cudaHostUnregister(ctypes.c_void_p(held[j])), "unregister")
        if work == "staged":
            for b in bufs: rt.cudaFreeHost(b)
    t = time.time()
    ts = [threading.Thread(target=worker) for _ in range(threads)]
    [x.start() for x in ts]; [x.join() for x in ts]
    el = time.time() - t
    print(f"{name}: chunk {chunk >> 20} MiB, {threads} threads: {size/el/1e9:.1f} GB/s ({el:.2f} s); thread-seconds registering {spent['register']:.2f}, madvise {spent['touch']:.2f}")

# a fresh mapping for each run would fault again; the first run warms the page tables of this mapping, so each variant
# runs on its own new mapping
for name, work, chunk in [("staged", "staged", 32 << 20), ("registered", "registered", 32 << 20), ("registered", "registered", 256 << 20),
                          ("staged", "staged", 32 << 20), ("registered", "registered", 64 << 20)]:
    addr = libc.mmap(None, size, 1, 1, fd, 0)
    try:
        run(name, work, chunk)
    except Exception as e:
        print(name, "failed:", e)
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]; libc.munmap(ctypes.c_void_p(addr), size)
