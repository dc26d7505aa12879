/*
 * background.c — the probe option `background` (background.h): a queue of
 * a run's calls, done in order by one thread of the run's own.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "background.h"

enum { JOB_RECORD, JOB_NOTE, JOB_SCALAR, JOB_STEP_END };

typedef struct job {
    struct job *next;
    int kind;
    union { /* the caller's function for the kind */
        fp8__bg_record_fn record;
        fp8__bg_note_fn note;
        fp8__bg_scalar_fn scalar;
        fp8__bg_step_end_fn step_end;
    } fn;
    fp8_probe *p;
    int64_t step;
    float *x; /* JOB_RECORD: the copy, rows x cols floats (reserved) */
    size_t rows, cols;
    float amax;        /* JOB_NOTE */
    unsigned nonfinite;
    int scalar;        /* JOB_SCALAR: the scalar's id */
    double value;
} job;

typedef struct spare { /* a buffer kept for reuse */
    struct spare *next;
    size_t cap;        /* floats */
} spare;

struct fp8__bg {
    fp8_probe_run *run;
    pid_t pid;          /* the process whose thread it is (a forked child has none) */
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, room, idle;
    job *head, *tail;
    int busy, stop;
    size_t bound, held; /* bytes: the bound, and those of buffers queued, in use or kept */
    spare *spares;
    job *idle_jobs;     /* done jobs kept for reuse, and how many */
    int nidle_jobs;
    int err;            /* the first error since asked (FP8_OK none) and its message */
    char msg[400];
};

int fp8__bg_foreign(const fp8__bg *b) { return getpid() != b->pid; }

static void put_buffer(fp8__bg *b, float *x, size_t cap) /* (mu held) */
{
    spare *s = (spare *)(void *)x; /* a float buffer of >= 4 floats holds the link */
    if (cap * sizeof(float) >= sizeof *s) {
        s->cap = cap, s->next = b->spares, b->spares = s;
        return;
    }
    free(x);
    b->held -= cap * sizeof(float);
}

static void run_job(fp8__bg *b, const job *j)
{
    int st = FP8_OK;
    switch (j->kind) {
    case JOB_RECORD:
        st = j->fn.record(j->p, j->step, j->x, j->rows, j->cols);
        break;
    case JOB_NOTE:
        j->fn.note(j->p, j->step, j->amax, j->nonfinite);
        break;
    case JOB_SCALAR:
        st = j->fn.scalar(b->run, j->scalar, j->step, j->value);
        break;
    default:
        st = j->fn.step_end(b->run);
        break;
    }
    if (st != FP8_OK) {
        pthread_mutex_lock(&b->mu);
        if (b->err == FP8_OK) {
            b->err = st;
            snprintf(b->msg, sizeof b->msg, "%s", fp8_error_message());
        }
        pthread_mutex_unlock(&b->mu);
    }
}

static void *worker(void *arg)
{
    fp8__bg *b = arg;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->head && !b->stop)
            pthread_cond_wait(&b->work, &b->mu);
        if (!b->head)
            break; /* stopped, nothing left */
        job *j = b->head;
        b->head = j->next;
        if (!b->head)
            b->tail = NULL;
        b->busy = 1;
        pthread_mutex_unlock(&b->mu);
        run_job(b, j);
        pthread_mutex_lock(&b->mu);
        if (j->x)
            put_buffer(b, j->x, j->rows * j->cols);
        if (b->nidle_jobs < 4096) /* (a loop's calls of one step, about) */
            j->next = b->idle_jobs, b->idle_jobs = j, b->nidle_jobs++;
        else
            free(j);
        b->busy = 0;
        pthread_cond_broadcast(&b->room);
        if (!b->head)
            pthread_cond_broadcast(&b->idle);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

fp8__bg *fp8__bg_start(fp8_probe_run *run, size_t bound)
{
    fp8__bg *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->run = run, b->bound = bound, b->pid = getpid();
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->work, NULL);
    pthread_cond_init(&b->room, NULL);
    pthread_cond_init(&b->idle, NULL);
    if (pthread_create(&b->thread, NULL, worker, b) != 0) {
        pthread_mutex_destroy(&b->mu);
        pthread_cond_destroy(&b->work), pthread_cond_destroy(&b->room), pthread_cond_destroy(&b->idle);
        free(b);
        return NULL;
    }
    return b;
}

/* (mu held) the spares freed until `want` more bytes fit the bound */
static void shed(fp8__bg *b, size_t want)
{
    while (b->spares && b->held + want > b->bound) {
        spare *s = b->spares;
        b->spares = s->next;
        b->held -= s->cap * sizeof(float);
        free(s);
    }
}

float *fp8__bg_buffer(fp8__bg *b, size_t n)
{
    if (!n || n > b->bound / sizeof(float))
        return NULL;
    pthread_mutex_lock(&b->mu);
    /* a spare of the size (a loop's shapes repeat) */
    for (spare **at = &b->spares; *at; at = &(*at)->next)
        if ((*at)->cap == n) {
            spare *s = *at;
            *at = s->next;
            pthread_mutex_unlock(&b->mu);
            return (float *)(void *)s;
        }
    const size_t bytes = n * sizeof(float);
    for (;;) {
        shed(b, bytes);
        if (b->held + bytes <= b->bound)
            break;
        pthread_cond_wait(&b->room, &b->mu); /* the queue holds the rest: wait until it is used */
    }
    b->held += bytes;
    pthread_mutex_unlock(&b->mu);
    float *x = malloc(bytes);
    if (!x) {
        pthread_mutex_lock(&b->mu);
        b->held -= bytes;
        pthread_mutex_unlock(&b->mu);
    }
    return x;
}

/* A copy of t queued (in a done job kept for reuse, or a new one); when
 * there is no memory for it, t done here instead, after everything before
 * it.  The thread is woken for records and step ends only: a noted amax or
 * a scalar waits for the next of those (or a drain), so a step's dozens of
 * small notes cost no wake-up each. */
static void push(fp8__bg *b, const job *t)
{
    pthread_mutex_lock(&b->mu);
    job *j = b->idle_jobs;
    if (j) {
        b->idle_jobs = j->next, b->nidle_jobs--;
    } else { /* (allocated without the lock) */
        pthread_mutex_unlock(&b->mu);
        if (!(j = malloc(sizeof *j))) {
            fp8__bg_drain(b);
            run_job(b, t);
            if (t->x) { /* the buffer back */
                pthread_mutex_lock(&b->mu);
                put_buffer(b, t->x, t->rows * t->cols);
                pthread_mutex_unlock(&b->mu);
            }
            return;
        }
        pthread_mutex_lock(&b->mu);
    }
    *j = *t;
    j->next = NULL;
    if (b->tail)
        b->tail->next = j;
    else
        b->head = j;
    b->tail = j;
    if (j->kind == JOB_RECORD || j->kind == JOB_STEP_END)
        pthread_cond_signal(&b->work);
    pthread_mutex_unlock(&b->mu);
}

void fp8__bg_record(fp8__bg *b, fp8__bg_record_fn fn, fp8_probe *p, int64_t step, float *x, size_t rows,
                    size_t cols)
{
    push(b, &(job){.kind = JOB_RECORD, .fn.record = fn, .p = p, .step = step, .x = x, .rows = rows, .cols = cols});
}

void fp8__bg_note(fp8__bg *b, fp8__bg_note_fn fn, fp8_probe *p, int64_t step, float amax, unsigned nonfinite)
{
    push(b, &(job){.kind = JOB_NOTE, .fn.note = fn, .p = p, .step = step, .amax = amax, .nonfinite = nonfinite});
}

void fp8__bg_scalar(fp8__bg *b, fp8__bg_scalar_fn fn, int scalar, int64_t step, double value)
{
    push(b, &(job){.kind = JOB_SCALAR, .fn.scalar = fn, .step = step, .scalar = scalar, .value = value});
}

void fp8__bg_step_end(fp8__bg *b, fp8__bg_step_end_fn fn, int64_t step)
{
    push(b, &(job){.kind = JOB_STEP_END, .fn.step_end = fn, .step = step});
}

void fp8__bg_drain(fp8__bg *b)
{
    pthread_mutex_lock(&b->mu);
    if (b->head)
        pthread_cond_signal(&b->work); /* (notes alone do not wake it) */
    while (b->head || b->busy)
        pthread_cond_wait(&b->idle, &b->mu);
    pthread_mutex_unlock(&b->mu);
}

int fp8__bg_error(fp8__bg *b)
{
    pthread_mutex_lock(&b->mu);
    int st = b->err;
    char msg[sizeof b->msg];
    memcpy(msg, b->msg, sizeof msg);
    b->err = FP8_OK;
    pthread_mutex_unlock(&b->mu);
    return st == FP8_OK ? FP8_OK : FP8_ERROR(st, "background: %s", msg);
}

void fp8__bg_stop(fp8__bg *b)
{
    if (!b)
        return;
    pthread_mutex_lock(&b->mu);
    b->stop = 1;
    pthread_cond_signal(&b->work);
    pthread_mutex_unlock(&b->mu);
    pthread_join(b->thread, NULL); /* it empties the queue first */
    while (b->spares) {
        spare *s = b->spares;
        b->spares = s->next;
        free(s);
    }
    while (b->idle_jobs) {
        job *j = b->idle_jobs;
        b->idle_jobs = j->next;
        free(j);
    }
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->work), pthread_cond_destroy(&b->room), pthread_cond_destroy(&b->idle);
    free(b);
}
