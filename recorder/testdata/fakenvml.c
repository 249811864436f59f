// A stand-in for libnvidia-ml.so.1 with two GPUs, for testing the native
// sampling loop without a GPU. GPU 0 answers GetMemoryInfo_v2; GPU 1 does
// not (the loop must fall back to GetMemoryInfo) and lists a garbage
// process entry (pid 0) beside its real one. Used memory grows by 2 MiB
// every 100 memory queries; each GPU has one process holding used - 256 MiB.
#include <stdio.h>
#include <string.h>

typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } mem2;
typedef struct { unsigned long long total, free, used; } mem1;
typedef struct { unsigned int pid; unsigned long long used; unsigned int gi, ci; } proc;

enum { GPUS = 2, SUCCESS = 0, INVALID = 2, NOT_SUPPORTED = 3, INSUFFICIENT = 7 };
static const unsigned long long total = 80ULL << 30;
static int devs[GPUS];
static unsigned long long queries[GPUS];

static int index_of(void *dev) {
	for (int i = 0; i < GPUS; i++)
		if (dev == &devs[i])
			return i;
	return -1;
}

static unsigned long long used_now(int i) { return (1ULL << 30) + (queries[i]++ / 100) * (2ULL << 20); }

int nvmlInit_v2(void) { return SUCCESS; }
int nvmlShutdown(void) { return SUCCESS; }
const char *nvmlErrorString(int r) { return r == SUCCESS ? "Success" : "Fake error"; }
int nvmlSystemGetDriverVersion(char *v, unsigned int n) { snprintf(v, n, "fake-1.0"); return SUCCESS; }
int nvmlDeviceGetCount_v2(unsigned int *n) { *n = GPUS; return SUCCESS; }
int nvmlDeviceGetHandleByIndex_v2(unsigned int i, void **dev) {
	if (i >= GPUS)
		return INVALID;
	*dev = &devs[i];
	return SUCCESS;
}
int nvmlDeviceGetUUID(void *dev, char *s, unsigned int n) { snprintf(s, n, "GPU-fake-%d", index_of(dev)); return SUCCESS; }
int nvmlDeviceGetName(void *dev, char *s, unsigned int n) { snprintf(s, n, "Fake GPU"); return SUCCESS; }
typedef struct {
	char busIdLegacy[16];
	unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
	char busId[32];
} pciinfo;
int nvmlDeviceGetPciInfo_v3(void *dev, pciinfo *p) {
	memset(p, 0, sizeof *p);
	p->bus = 0x10 + index_of(dev);
	snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", p->bus);
	return SUCCESS;
}
int nvmlDeviceGetMinorNumber(void *dev, unsigned int *m) { *m = index_of(dev); return SUCCESS; }
int nvmlDeviceGetMemoryInfo(void *dev, mem1 *m) {
	int i = index_of(dev);
	m->total = total, m->used = used_now(i), m->free = total - m->used;
	return SUCCESS;
}
int nvmlDeviceGetMemoryInfo_v2(void *dev, mem2 *m) {
	int i = index_of(dev);
	if (i == 1)
		return NOT_SUPPORTED;
	m->total = total, m->reserved = 512ULL << 20, m->used = used_now(i), m->free = total - m->used - m->reserved;
	return SUCCESS;
}
int nvmlDeviceGetComputeRunningProcesses_v3(void *dev, unsigned int *count, proc *p) {
	int i = index_of(dev);
	unsigned int want = i == 1 ? 2 : 1;
	if (*count < want) {
		*count = want;
		return INSUFFICIENT;
	}
	// What the GPU held at its last memory query.
	unsigned long long used = (1ULL << 30) + ((queries[i] - 1) / 100) * (2ULL << 20);
	p[0] = (proc){.pid = 4000 + i, .used = used - (256ULL << 20)};
	if (i == 1)
		p[1] = (proc){.pid = 0, .used = 5};
	*count = want;
	return SUCCESS;
}
