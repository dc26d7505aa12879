/*
 * live.h — internal: which probe and run handles are live.  A handle used
 * after fp8_probe_close freed it (or never returned by the API) is refused
 * with a message instead of being dereferenced.  This catches the mistake
 * unless the allocator has handed the same address to a new handle since.
 */
#ifndef FP8_PROBE_LIVE_H
#define FP8_PROBE_LIVE_H

/* 0, or -1 when out of memory (the handle is then not created). */
int fp8__live_add(const void *p);
void fp8__live_remove(const void *p);
int fp8__live_has(const void *p);

#endif
