// A kernel timeline for any CUDA process, where Nsight Systems is missing (the
// device image has none): loaded by the driver through CUDA_INJECTION64_PATH, it
// records every kernel and memory copy with CUPTI's activity API and, at exit,
// writes one line per record to $CUPTI_TRACE_DIR/trace-<pid>.tsv:
//   kind  device  stream  start_ns  end_ns  name
// Build on the device: nvcc -shared -Xcompiler -fPIC -o libtrace.so cupti_trace.c
//   -I<cupti include> -L<cupti lib> -lcupti (benches/device_new_systems.sh mpitrace).
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef KREC
#define KREC CUpti_ActivityKernel9
#endif
#ifndef MREC
#define MREC CUpti_ActivityMemcpy5
#endif

static FILE *out;

static void CUPTIAPI requested(uint8_t **buf, size_t *size, size_t *max) {
    *size = 8 << 20;
    *buf = (uint8_t *)aligned_alloc(8, *size);
    *max = 0;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                               size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *rec = NULL;
    while (out && cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
            rec->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            KREC *k = (KREC *)rec;
            fprintf(out, "K\t%u\t%u\t%llu\t%llu\t%.90s\n", k->deviceId, k->streamId,
                    (unsigned long long)k->start, (unsigned long long)k->end, k->name);
        } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            MREC *m = (MREC *)rec;
            fprintf(out, "M\t%u\t%u\t%llu\t%llu\tcopy kind %u bytes %llu\n", m->deviceId,
                    m->streamId, (unsigned long long)m->start, (unsigned long long)m->end,
                    m->copyKind, (unsigned long long)m->bytes);
        }
    }
    free(buf);
}

static void finish(void) {
    cuptiActivityFlushAll(1);
    if (out) fclose(out);
    out = NULL;
}

int InitializeInjection(void) {
    const char *dir = getenv("CUPTI_TRACE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/trace-%d.tsv", dir ? dir : "/tmp", (int)getpid());
    out = fopen(path, "w");
    if (!out) return 0;
    cuptiActivityRegisterCallbacks(requested, completed);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY);
    atexit(finish);
    return 1;
}
