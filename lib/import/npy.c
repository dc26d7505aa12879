/*
 * npy.c — .npy and raw float32 readers (see fp8_npy.h).  The header is a
 * Python dict literal; we accept exactly the three keys NumPy writes
 * ('descr', 'fortran_order', 'shape') and refuse anything else clearly.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fp8_error.h"
#include "fp8_format.h"
#include "fp8_npy.h"

static int host_little(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

static void swap_bytes(void *p, size_t n, size_t width)
{
    uint8_t *b = p;
    for (size_t i = 0; i < n; i++, b += width)
        for (size_t k = 0; k < width / 2; k++) {
            uint8_t t = b[k];
            b[k] = b[width - 1 - k];
            b[width - 1 - k] = t;
        }
}

/* The header is a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
 * parsed as one: quoted keys at the top level, each exactly once, values a
 * quoted string, True/False or a tuple of non-negative integers.  Every read
 * stays inside the hlen bytes. */
typedef struct {
    const char *p, *end;
} cursor;

static void skip_space(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static int take(cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}

/* a '...' or "..." literal without escapes, copied into out (size n) */
static int quoted(cursor *c, char *out, size_t n)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return 0;
    char q = *c->p++;
    size_t k = 0;
    while (c->p < c->end && *c->p != q) {
        if (*c->p == '\\' || k + 1 >= n)
            return 0;
        out[k++] = *c->p++;
    }
    if (c->p >= c->end)
        return 0;
    c->p++;
    out[k] = 0;
    return 1;
}

typedef struct {
    char descr[16];
    int fortran;
    size_t dims[32], nd;
    int have_descr, have_fortran, have_shape;
} npy_header;

/* Parse; on failure write a reason into why (size wn). */
static int parse_header(const char *h, size_t hlen, npy_header *o, char *why, size_t wn)
{
    cursor c = {h, h + hlen};
    memset(o, 0, sizeof *o);
    if (!take(&c, '{')) {
        snprintf(why, wn, "the header is not a dict");
        return 0;
    }
    for (;;) {
        if (take(&c, '}'))
            break;
        char key[32];
        if (!quoted(&c, key, sizeof key)) {
            snprintf(why, wn, "a key of the header dict is not a short quoted string");
            return 0;
        }
        if (!take(&c, ':')) {
            snprintf(why, wn, "no ':' after the header key '%s'", key);
            return 0;
        }
        if (strcmp(key, "descr") == 0) {
            if (o->have_descr++ || !quoted(&c, o->descr, sizeof o->descr)) {
                snprintf(why, wn, o->have_descr > 1 ? "'descr' appears twice" : "'descr' is not a short quoted string");
                return 0;
            }
        } else if (strcmp(key, "fortran_order") == 0) {
            skip_space(&c);
            if (o->have_fortran++) {
                snprintf(why, wn, "'fortran_order' appears twice");
                return 0;
            }
            if ((size_t)(c.end - c.p) >= 4 && memcmp(c.p, "True", 4) == 0)
                o->fortran = 1, c.p += 4;
            else if ((size_t)(c.end - c.p) >= 5 && memcmp(c.p, "False", 5) == 0)
                c.p += 5;
            else {
                snprintf(why, wn, "'fortran_order' is neither True nor False");
                return 0;
            }
        } else if (strcmp(key, "shape") == 0) {
            if (o->have_shape++) {
                snprintf(why, wn, "'shape' appears twice");
                return 0;
            }
            if (!take(&c, '(')) {
                snprintf(why, wn, "'shape' is not a tuple");
                return 0;
            }
            for (;;) {
                if (take(&c, ')'))
                    break;
                skip_space(&c);
                if (c.p < c.end && *c.p == '-') {
                    snprintf(why, wn, "negative dimension in 'shape'");
                    return 0;
                }
                unsigned long long v = 0;
                const char *start = c.p;
                while (c.p < c.end && *c.p >= '0' && *c.p <= '9') {
                    if (v > (ULLONG_MAX - 9) / 10) {
                        snprintf(why, wn, "a dimension in 'shape' is too large");
                        return 0;
                    }
                    v = v * 10 + (unsigned long long)(*c.p++ - '0');
                }
                if (c.p == start) {
                    snprintf(why, wn, "'shape' holds something other than integers");
                    return 0;
                }
                if (o->nd >= sizeof o->dims / sizeof o->dims[0] || v > SIZE_MAX) {
                    snprintf(why, wn, "'shape' has more than 32 dimensions or one too large");
                    return 0;
                }
                o->dims[o->nd++] = (size_t)v;
                if (!take(&c, ',')) {
                    if (!take(&c, ')')) {
                        snprintf(why, wn, "'shape' is not a tuple of integers");
                        return 0;
                    }
                    break;
                }
            }
        } else {
            snprintf(why, wn, "unexpected key '%s' in the header", key);
            return 0;
        }
        if (!take(&c, ',')) {
            if (!take(&c, '}')) {
                snprintf(why, wn, "the header dict is not closed");
                return 0;
            }
            break;
        }
    }
    skip_space(&c);
    if (c.p != c.end) {
        snprintf(why, wn, "bytes after the header dict");
        return 0;
    }
    if (!o->have_descr || !o->have_fortran || !o->have_shape) {
        snprintf(why, wn, "the header lacks %s", !o->have_descr ? "'descr'" : !o->have_fortran ? "'fortran_order'" : "'shape'");
        return 0;
    }
    return 1;
}

int fp8_npy_read(const char *path, float **data, size_t *rows, size_t *cols)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return FP8_ERROR(FP8_EIO, "%s: cannot open: %s", path, strerror(errno));
    uint8_t pre[10];
    char *hdr = NULL;
    void *raw = NULL;
    float *out = NULL;
    int st = FP8_OK;
    if (fread(pre, 1, 8, f) != 8 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        st = FP8_ERROR(FP8_EINVAL, "%s: not a .npy file (no \\x93NUMPY magic)", path);
        goto done;
    }
    size_t hlen;
    if (pre[6] == 1) {
        if (fread(pre + 8, 1, 2, f) != 2)
            goto truncated;
        hlen = (size_t)pre[8] | (size_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        uint8_t l4[4];
        if (fread(l4, 1, 4, f) != 4)
            goto truncated;
        hlen = (size_t)l4[0] | (size_t)l4[1] << 8 | (size_t)l4[2] << 16 | (size_t)l4[3] << 24;
    } else {
        st = FP8_ERROR(FP8_EINVAL, "%s: unsupported .npy version %d.%d", path, pre[6], pre[7]);
        goto done;
    }
    if (hlen > (1u << 20)) {
        st = FP8_ERROR(FP8_EINVAL, "%s: .npy header of %zu bytes is implausible", path, hlen);
        goto done;
    }
    hdr = calloc(hlen + 1, 1);
    if (!hdr) {
        st = FP8_ERROR(FP8_ENOMEM, "%s: out of memory", path);
        goto done;
    }
    if (fread(hdr, 1, hlen, f) != hlen)
        goto truncated;
    npy_header H;
    char why[96];
    if (!parse_header(hdr, hlen, &H, why, sizeof why)) {
        st = FP8_ERROR(FP8_EINVAL, "%s: bad .npy header: %s", path, why);
        goto done;
    }
    const char *d = H.descr;
    char bo = d[0], kind = d[0] ? d[1] : 0;
    int width = kind ? d[2] - '0' : 0;
    if ((bo != '<' && bo != '>' && bo != '|' && bo != '=') || kind != 'f' || (width != 4 && width != 2) || d[3]) {
        st = FP8_ERROR(FP8_EINVAL, "%s: dtype '%s' is not float32 or float16", path, d);
        goto done;
    }
    int fortran = H.fortran;
    size_t nd = H.nd, numel = 1, *dims = H.dims;
    for (size_t k = 0; k < nd; k++) {
        size_t v = dims[k];
        if (v && numel > SIZE_MAX / 8 / v) {
            st = FP8_ERROR(FP8_EINVAL, "%s: shape too large", path);
            goto done;
        }
        numel *= v;
    }
    if (numel == 0) {
        st = FP8_ERROR(FP8_EINVAL, "%s: the array is empty", path);
        goto done;
    }
    size_t c = nd ? dims[nd - 1] : 1, r = numel / c;
    long here = ftell(f);
    struct stat sb;
    if (here < 0 || fstat(fileno(f), &sb) != 0 || sb.st_size < here ||
        (uint64_t)(sb.st_size - here) < (uint64_t)numel * (uint64_t)width) {
        st = FP8_ERROR(FP8_EINVAL, "%s: file is truncated: the header promises %zu elements of %d bytes", path, numel,
                       width);
        goto done;
    }
    raw = malloc(numel * (size_t)width);
    out = malloc(numel * sizeof *out);
    if (!raw || !out) {
        st = FP8_ERROR(FP8_ENOMEM, "%s: out of memory for %zu elements", path, numel);
        goto done;
    }
    if (fread(raw, (size_t)width, numel, f) != numel)
        goto truncated;
    int file_little = bo == '<' || (bo != '>' && host_little());
    if (width > 1 && file_little != host_little())
        swap_bytes(raw, numel, (size_t)width);
    float *flat = width == 4 ? raw : out;
    if (width == 2) {
        const fp8_format *h = fp8_format_find("fp16", NULL);
        const uint16_t *hv = raw;
        for (size_t i = 0; i < numel; i++)
            out[i] = fp8_format_decode(h, hv[i]);
    }
    if (fortran && nd >= 2) {
        /* column-major: element (i over leading dims, j) sits at j*r + i */
        float *tmp = malloc(numel * sizeof *tmp);
        if (!tmp) {
            st = FP8_ERROR(FP8_ENOMEM, "%s: out of memory", path);
            goto done;
        }
        /* Fortran order flattens the leading axes in reverse; only 2-D is
         * unambiguous enough to accept */
        if (nd > 2) {
            free(tmp);
            st = FP8_ERROR(FP8_EINVAL, "%s: Fortran-ordered arrays of more than 2 dimensions are not supported", path);
            goto done;
        }
        for (size_t i = 0; i < r; i++)
            for (size_t j = 0; j < c; j++)
                tmp[i * c + j] = flat[j * r + i];
        memcpy(out, tmp, numel * sizeof *out);
        free(tmp);
    } else if (width == 4) {
        memcpy(out, raw, numel * sizeof *out);
    }
    *data = out;
    out = NULL;
    *rows = r;
    *cols = c;
    goto done;
truncated:
    st = FP8_ERROR(FP8_EINVAL, "%s: file is truncated", path);
done:
    fclose(f);
    free(hdr);
    free(raw);
    free(out);
    return st;
}

int fp8_npy_sniff(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return FP8_ERROR(FP8_EIO, "%s: cannot open: %s", path, strerror(errno)), -1;
    char m[6];
    size_t got = fread(m, 1, sizeof m, f);
    fclose(f);
    return got == sizeof m && memcmp(m, "\x93NUMPY", 6) == 0;
}

int fp8_raw_read(const char *path, size_t rows, size_t cols, float **data, size_t *out_rows, size_t *out_cols)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return FP8_ERROR(FP8_EIO, "%s: cannot open: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return FP8_ERROR(FP8_EIO, "%s: cannot seek", path);
    }
    long sz = ftell(f);
    rewind(f);
    if (sz <= 0 || sz % 4) {
        fclose(f);
        return FP8_ERROR(FP8_EINVAL, "%s: size %ld bytes is not a positive multiple of 4 (raw float32)", path, sz);
    }
    size_t n = (size_t)sz / 4;
    if (!rows && !cols)
        rows = 1, cols = n;
    else if (!cols)
        cols = n / rows;
    else if (!rows)
        rows = n / cols;
    if (rows * cols != n) {
        fclose(f);
        return FP8_ERROR(FP8_EINVAL, "%s: %zu float32 values do not fill a %zux%zu tensor", path, n, rows, cols);
    }
    float *out = malloc(n * sizeof *out);
    if (!out) {
        fclose(f);
        return FP8_ERROR(FP8_ENOMEM, "%s: out of memory", path);
    }
    size_t got = fread(out, 4, n, f);
    fclose(f);
    if (got != n) {
        free(out);
        return FP8_ERROR(FP8_EIO, "%s: short read", path);
    }
    if (!host_little())
        swap_bytes(out, n, 4);
    *data = out;
    *out_rows = rows;
    *out_cols = cols;
    return FP8_OK;
}

int fp8_npy_write(const char *path, const float *data, size_t rows, size_t cols)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return FP8_ERROR(FP8_EIO, "%s: cannot create: %s", path, strerror(errno));
    char dict[128];
    int len = snprintf(dict, sizeof dict, "{'descr': '<f4', 'fortran_order': False, 'shape': (%zu, %zu), }", rows, cols);
    int total = 10 + len + 1;
    int pad = (64 - total % 64) % 64;
    char hdr[256];
    memcpy(hdr, "\x93NUMPY\x01\x00", 8);
    uint16_t hl = (uint16_t)(len + pad + 1);
    hdr[8] = (char)(hl & 0xFF);
    hdr[9] = (char)(hl >> 8);
    memcpy(hdr + 10, dict, (size_t)len);
    memset(hdr + 10 + len, ' ', (size_t)pad);
    hdr[10 + len + pad] = '\n';
    int ok = fwrite(hdr, 1, (size_t)(total + pad), f) == (size_t)(total + pad);
    if (ok && host_little())
        ok = fwrite(data, 4, rows * cols, f) == rows * cols;
    else if (ok) {
        for (size_t i = 0; ok && i < rows * cols; i++) {
            float v = data[i];
            swap_bytes(&v, 1, 4);
            ok = fwrite(&v, 4, 1, f) == 1;
        }
    }
    if (fclose(f) != 0)
        ok = 0;
    return ok ? FP8_OK : FP8_ERROR(FP8_EIO, "%s: write failed", path);
}
