/*
 * live.h — internal: which probe and run handles are live, and of which
 * type.  A handle used after fp8_probe_close freed it, never returned by
 * the API, or of the other type (a probe passed as a run) is refused with a
 * message instead of being dereferenced.  This catches the mistake unless
 * the allocator has handed the same address to a new handle of the same
 * type since.
 */
#ifndef FP8_PROBE_LIVE_H
#define FP8_PROBE_LIVE_H

typedef enum { FP8__LIVE_RUN = 1, FP8__LIVE_PROBE = 2 } fp8__live_kind;

/* 0, or -1 when out of memory (the handle is then not created). */
int fp8__live_add(const void *p, fp8__live_kind kind);
void fp8__live_remove(const void *p);
/* 1 when p is a live handle of this kind */
int fp8__live_has(const void *p, fp8__live_kind kind);
/* the kind of live handle p, 0 when it is none */
int fp8__live_kind_of(const void *p);

#endif
