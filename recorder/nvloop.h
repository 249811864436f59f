// The NVML sampling loop that runs on a thread of its own, outside the Go
// runtime (see nvloop_linux.go for why). It reads NVML through the symbols
// of the library go-nvml already loaded and hands records to Go through a
// single-producer, single-consumer ring.
#include <stdint.h>

enum {
	NVLOOP_TICK = 1,     // a tick was taken: a = how late it started (ns)
	NVLOOP_MISSED = 2,   // a = ticks skipped because their time had passed
	NVLOOP_DEVICE = 3,   // a = used, b = reserved (bytes)
	NVLOOP_PROC = 4,     // a = pid, b = used (bytes)
	NVLOOP_MEM_ERR = 5,  // a = NVML return code of the memory query
	NVLOOP_PROC_ERR = 6, // a = NVML return code of the process query
};

typedef struct {
	int64_t t;    // CLOCK_REALTIME of the tick, ns since the epoch
	int64_t a, b; // by kind, above
	int32_t kind;
	int32_t gpu;  // the GPU's NVML index
} nvloop_rec;

typedef struct nvloop nvloop;

// nvloop_start opens the NVML library at path (already loaded by go-nvml),
// gets a handle for each of the n GPU indices and starts the sampling
// thread: tick k at start + k·interval on CLOCK_MONOTONIC. With procs, a
// GPU's processes are listed when its used memory changed since the last
// list, or procs_every ns have passed (0: every tick). It returns NULL and
// writes why into err on failure.
nvloop *nvloop_start(const char *path, const int32_t *gpus, int n, int64_t interval,
		int procs, int64_t procs_every, int cap, char *err, int errlen);

// nvloop_drain moves up to max records into out and returns how many. Only
// one thread may drain.
int nvloop_drain(nvloop *l, nvloop_rec *out, int max);

// nvloop_lost is the number of records dropped because the ring was full.
uint64_t nvloop_lost(nvloop *l);

// nvloop_stop stops the thread (within 100 ms) and waits for it. Records
// left in the ring can still be drained; then nvloop_free.
void nvloop_stop(nvloop *l);
void nvloop_free(nvloop *l);
