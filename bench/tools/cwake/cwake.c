// cwake: what a C thread pays to wake every interval on an absolute
// schedule (clock_nanosleep) and read NVML, outside any runtime.
// Usage: cwake INTERVAL_US SECONDS MODE  (MODE: sleep, v1, v2, v2x2, v2procs; PIN=cpu pins it)
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sched.h>

typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } mem2;
typedef struct { unsigned long long total, free, used; } mem1;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } proc3;
typedef int (*initf)(void);
typedef int (*handlef)(unsigned int, void **);
typedef int (*mem2f)(void *, mem2 *);
typedef int (*mem1f)(void *, mem1 *);
typedef int (*procf)(void *, unsigned int *, proc3 *);

static long long ns(clockid_t c) { struct timespec t; clock_gettime(c, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }

int main(int argc, char **argv) {
	long long iv = atoll(argv[1]) * 1000LL, secs = atoll(argv[2]);
	const char *mode = argv[3];
	void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!lib) { fprintf(stderr, "no nvml\n"); return 1; }
	((initf)dlsym(lib, "nvmlInit_v2"))();
	void *dev; ((handlef)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"))(0, &dev);
	mem2f m2 = (mem2f)dlsym(lib, "nvmlDeviceGetMemoryInfo_v2");
	mem1f m1 = (mem1f)dlsym(lib, "nvmlDeviceGetMemoryInfo");
	procf pr = (procf)dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3");
	prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0);
	if (getenv("PIN")) { cpu_set_t s; CPU_ZERO(&s); CPU_SET(atoi(getenv("PIN")), &s); sched_setaffinity(0, sizeof s, &s); }
	struct rusage r0, r1; getrusage(RUSAGE_SELF, &r0);
	long long t0 = ns(CLOCK_MONOTONIC), late = 0, n = 0;
	unsigned long long sink = 0;
	for (long long k = 1; ; k++) {
		long long dl = t0 + k * iv;
		struct timespec ts = { dl / 1000000000LL, dl % 1000000000LL };
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL)) {}
		long long now = ns(CLOCK_MONOTONIC);
		if (now - dl > iv) late++;
		n++;
		if (!strcmp(mode, "v2") || !strcmp(mode, "v2procs")) { mem2 m = { sizeof(mem2) | (2u << 24) }; m2(dev, &m); sink += m.used; }
		if (!strcmp(mode, "v2x2")) { for (int i = 0; i < 2; i++) { mem2 m = { sizeof(mem2) | (2u << 24) }; m2(dev, &m); sink += m.used; } }
		if (!strcmp(mode, "v1")) { mem1 m; m1(dev, &m); sink += m.used; }
		if (!strcmp(mode, "v2procs")) { proc3 p[64]; unsigned int c = 64; pr(dev, &c, p); sink += c; }
		if (now - t0 > secs * 1000000000LL) break;
	}
	getrusage(RUSAGE_SELF, &r1);
	double wall = (ns(CLOCK_MONOTONIC) - t0) / 1e9;
	double cpu = (r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) + (r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6 +
		(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) + (r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
	printf("C %-8s %5lldus %lld ticks %.3f%% late %.2f%% of one core (sink %llu)\n", mode, iv / 1000, n, 100.0 * late / n, 100 * cpu / wall, sink % 7);
	return 0;
}
