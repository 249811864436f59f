//go:build linux && cgo

#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "nvloop.h"

// The few NVML types the loop needs, as laid out in nvml.h.
typedef void *nvml_device;
typedef struct {
	unsigned int version; // sizeof | 2<<24 (NVML_STRUCT_VERSION(Memory, 2))
	unsigned long long total, reserved, free, used;
} nvml_memory_v2;
typedef struct {
	unsigned long long total, free, used;
} nvml_memory;
typedef struct { // nvmlProcessInfo_t (v2 layout, used by _v3 and _v2)
	unsigned int pid;
	unsigned long long used;
	unsigned int gpu_instance, compute_instance;
} nvml_process;

enum { NVML_SUCCESS = 0, NVML_NOT_SUPPORTED = 3, NVML_FUNCTION_NOT_FOUND = 13, NVML_VERSION_MISMATCH = 25 };
enum { MAX_PROCS = 256 };

typedef int (*handle_fn)(unsigned int, nvml_device *);
typedef int (*memory_v2_fn)(nvml_device, nvml_memory_v2 *);
typedef int (*memory_fn)(nvml_device, nvml_memory *);
typedef int (*procs_fn)(nvml_device, unsigned int *, nvml_process *);

typedef struct {
	int32_t index;
	nvml_device dev;
	int no_v2, no_procs;
	int listed;                  // processes listed at least once
	unsigned long long list_used; // used memory at the last list
	int64_t listed_at;           // CLOCK_MONOTONIC of the last list
} gpu;

struct nvloop {
	pthread_t thread;
	int stop; // set by nvloop_stop, read by the thread (atomics below)

	memory_v2_fn memory_v2;
	memory_fn memory;
	procs_fn procs;
	gpu *gpus;
	int n;
	int64_t interval, procs_every;
	int want_procs;
	nvml_process list[MAX_PROCS];

	// The ring: the thread writes records at head, Go reads at tail.
	nvloop_rec *ring;
	uint64_t mask;
	uint64_t head, tail, lost;
};

static int64_t now_ns(clockid_t c) {
	struct timespec ts;
	clock_gettime(c, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void push(nvloop *l, int32_t kind, int32_t gpu, int64_t t, int64_t a, int64_t b) {
	uint64_t h = __atomic_load_n(&l->head, __ATOMIC_RELAXED);
	if (h - __atomic_load_n(&l->tail, __ATOMIC_ACQUIRE) > l->mask) {
		__atomic_fetch_add(&l->lost, 1, __ATOMIC_RELAXED);
		return;
	}
	l->ring[h & l->mask] = (nvloop_rec){.t = t, .a = a, .b = b, .kind = kind, .gpu = gpu};
	__atomic_store_n(&l->head, h + 1, __ATOMIC_RELEASE);
}

// read_gpu takes one GPU's reading at the tick (t realtime, mono monotonic).
static void read_gpu(nvloop *l, gpu *g, int64_t t, int64_t mono) {
	unsigned long long used = 0, reserved = 0;
	int ret = NVML_NOT_SUPPORTED;
	if (!g->no_v2) {
		nvml_memory_v2 m = {.version = sizeof(nvml_memory_v2) | 2u << 24};
		ret = l->memory_v2(g->dev, &m);
		if (ret == NVML_NOT_SUPPORTED || ret == NVML_FUNCTION_NOT_FOUND || ret == NVML_VERSION_MISMATCH)
			g->no_v2 = 1;
		used = m.used, reserved = m.reserved;
	}
	if (g->no_v2) {
		nvml_memory m = {0};
		ret = l->memory(g->dev, &m);
		used = m.used, reserved = 0;
	}
	if (ret != NVML_SUCCESS) {
		push(l, NVLOOP_MEM_ERR, g->index, t, ret, 0);
		return;
	}
	push(l, NVLOOP_DEVICE, g->index, t, (int64_t)used, (int64_t)reserved);
	if (!l->want_procs || g->no_procs)
		return;
	// Processes change what they hold only by changing the GPU's used
	// memory, so the list is read again only when that moved (or it is
	// time for the periodic list): a fraction of the ticks, at the same
	// fidelity.
	if (g->listed && used == g->list_used && mono - g->listed_at < l->procs_every)
		return;
	unsigned int count = MAX_PROCS;
	ret = l->procs(g->dev, &count, l->list);
	if (ret == NVML_NOT_SUPPORTED) {
		g->no_procs = 1;
		return;
	}
	if (ret != NVML_SUCCESS) {
		push(l, NVLOOP_PROC_ERR, g->index, t, ret, 0);
		return;
	}
	g->listed = 1, g->list_used = used, g->listed_at = mono;
	for (unsigned int i = 0; i < count && i < MAX_PROCS; i++)
		push(l, NVLOOP_PROC, g->index, t, l->list[i].pid, (int64_t)l->list[i].used);
}

static void *run(void *arg) {
	nvloop *l = arg;
	// Signals belong to Go's threads; a sleeping sampler should not be
	// picked to take them.
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	// Timer slack 1 ns (the default adds 50 µs to every sleep) and, where
	// allowed (CAP_SYS_NICE), a priority above the training job's threads.
	prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
	setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), -10);

	const int64_t max_sleep = 100000000; // notice nvloop_stop within 100 ms
	int64_t t0 = now_ns(CLOCK_MONOTONIC);
	for (int64_t k = 0; !__atomic_load_n(&l->stop, __ATOMIC_ACQUIRE);) {
		int64_t deadline = t0 + k * l->interval;
		int64_t mono = now_ns(CLOCK_MONOTONIC);
		if (mono < deadline) {
			int64_t until = deadline - mono > max_sleep ? mono + max_sleep : deadline;
			struct timespec ts = {until / 1000000000LL, until % 1000000000LL};
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
			continue;
		}
		int64_t late = mono - deadline, t = now_ns(CLOCK_REALTIME);
		if (late > l->interval) { // its start window has passed: skip it, and any others
			int64_t skip = late / l->interval;
			push(l, NVLOOP_MISSED, -1, t, skip, 0);
			k += skip;
			continue;
		}
		push(l, NVLOOP_TICK, -1, t, late, 0);
		for (int i = 0; i < l->n; i++)
			read_gpu(l, &l->gpus[i], t, mono);
		k++;
	}
	return NULL;
}

nvloop *nvloop_start(const char *path, const int32_t *gpus, int n, int64_t interval,
		int procs, int64_t procs_every, int cap, char *err, int errlen) {
	void *lib = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	if (!lib) {
		snprintf(err, errlen, "%s is not loaded", path);
		return NULL;
	}
	handle_fn handle = (handle_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
	memory_fn memory = (memory_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo");
	memory_v2_fn memory_v2 = (memory_v2_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo_v2");
	procs_fn list = (procs_fn)dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
	if (!list)
		list = (procs_fn)dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v2");
	dlclose(lib); // go-nvml keeps it open
	if (!handle || !memory || (procs && !list)) {
		snprintf(err, errlen, "%s lacks the functions the loop needs", path);
		return NULL;
	}
	nvloop *l = calloc(1, sizeof *l);
	int size = 1;
	while (size < cap)
		size <<= 1;
	l->ring = calloc(size, sizeof(nvloop_rec));
	l->gpus = calloc(n, sizeof(gpu));
	if (!l->ring || !l->gpus) {
		snprintf(err, errlen, "out of memory");
		nvloop_free(l);
		return NULL;
	}
	l->mask = size - 1;
	l->memory = memory;
	l->memory_v2 = memory_v2;
	l->procs = list;
	l->n = n;
	l->interval = interval;
	l->want_procs = procs;
	l->procs_every = procs_every;
	for (int i = 0; i < n; i++) {
		l->gpus[i].index = gpus[i];
		l->gpus[i].no_v2 = memory_v2 == NULL;
		int ret = handle(gpus[i], &l->gpus[i].dev);
		if (ret != NVML_SUCCESS) {
			snprintf(err, errlen, "GPU %d: NVML handle: error %d", gpus[i], ret);
			nvloop_free(l);
			return NULL;
		}
	}
	int ret = pthread_create(&l->thread, NULL, run, l);
	if (ret != 0) {
		snprintf(err, errlen, "cannot start the sampling thread: %s", strerror(ret));
		nvloop_free(l);
		return NULL;
	}
	return l;
}

int nvloop_drain(nvloop *l, nvloop_rec *out, int max) {
	uint64_t t = l->tail, h = __atomic_load_n(&l->head, __ATOMIC_ACQUIRE);
	int n = 0;
	for (; t != h && n < max; t++, n++)
		out[n] = l->ring[t & l->mask];
	__atomic_store_n(&l->tail, t, __ATOMIC_RELEASE);
	return n;
}

uint64_t nvloop_lost(nvloop *l) { return __atomic_load_n(&l->lost, __ATOMIC_RELAXED); }

void nvloop_stop(nvloop *l) {
	__atomic_store_n(&l->stop, 1, __ATOMIC_RELEASE);
	pthread_join(l->thread, NULL);
}

void nvloop_free(nvloop *l) {
	free(l->ring);
	free(l->gpus);
	free(l);
}
