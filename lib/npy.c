/*
 * npy.c — .npy and raw float32 readers (see fp8_npy.h).  The header is a
 * Python dict literal; we parse only the three keys NumPy writes ('descr',
 * 'fortran_order', 'shape') and refuse anything else clearly.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* value text after 'key': in the header dict */
static const char *dict_value(const char *hdr, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(hdr, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ' || *p == ':')
        p++;
    return p;
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
    const char *d = dict_value(hdr, "descr"), *fo = dict_value(hdr, "fortran_order"), *sh = dict_value(hdr, "shape");
    if (!d || !fo || !sh) {
        st = FP8_ERROR(FP8_EINVAL, "%s: .npy header lacks descr, fortran_order or shape", path);
        goto done;
    }
    char bo = d[1], kind = d[2];
    int width = d[3] - '0';
    if (d[0] != '\'' || (bo != '<' && bo != '>' && bo != '|' && bo != '=') || kind != 'f' ||
        (width != 4 && width != 2) || d[4] != '\'') {
        char shown[16];
        size_t k = 0; /* the quoted dtype string */
        while (k < sizeof shown - 1 && d[k] && !(k > 0 && d[k - 1] == '\'' && k > 1))
            shown[k] = d[k], k++;
        shown[k] = 0;
        st = FP8_ERROR(FP8_EINVAL, "%s: dtype %s is not float32 or float16", path, shown);
        goto done;
    }
    int fortran = strncmp(fo, "True", 4) == 0;
    if (*sh != '(') {
        st = FP8_ERROR(FP8_EINVAL, "%s: cannot read the shape in the .npy header", path);
        goto done;
    }
    size_t dims[32], nd = 0, numel = 1;
    for (const char *p = sh + 1; *p && *p != ')';) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')')
            break;
        char *end;
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p || errno || nd >= 32) {
            st = FP8_ERROR(FP8_EINVAL, "%s: bad shape in the .npy header", path);
            goto done;
        }
        dims[nd++] = (size_t)v;
        if (v && numel > SIZE_MAX / 8 / v) {
            st = FP8_ERROR(FP8_EINVAL, "%s: shape too large", path);
            goto done;
        }
        numel *= (size_t)v;
        p = end;
    }
    if (numel == 0) {
        st = FP8_ERROR(FP8_EINVAL, "%s: the array is empty", path);
        goto done;
    }
    size_t c = nd ? dims[nd - 1] : 1, r = numel / c;
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
