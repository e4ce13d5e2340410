/* A --cmd-serve command in C for the tests and the bench: tf Conv2D (NHWC and NCHW, SAME,
 * VALID and EXPLICIT padding, strides, dilations, groups) in double precision. Reads one
 * "IN OUT" line per case on stdin: IN a folder of NAME.npy files (little-endian float32,
 * float64 or int64 arrays, 0-d unicode strings), OUT the .npy it writes (float64); answers
 * "ok", or "unsupported MESSAGE" for another op or dtype, or "error MESSAGE".
 * Build: cc -O2 -o serve_conv2d verify_serve_conv2d.c */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAXDIM 8

typedef struct {
    int ndim;
    long shape[MAXDIM];
    long size;
    double *data; /* numbers as double */
    char text[64]; /* a 0-d unicode string, as ASCII */
} Array;

static char error[256];

/* Parse one .npy file (format 1.0-3.0); 0 on success, else error[] says why. */
static int load(const char *dir, const char *name, Array *a) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) { snprintf(error, sizeof error, "cannot open %s.npy", name); return -1; }
    unsigned char magic[8];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "\x93NUMPY", 6)) {
        fclose(f); snprintf(error, sizeof error, "%s.npy is not an .npy file", name); return -1;
    }
    unsigned long hlen = 0;
    if (magic[6] == 1) {
        unsigned char b[2]; if (fread(b, 1, 2, f) != 2) { fclose(f); return -1; }
        hlen = b[0] | (b[1] << 8);
    } else {
        unsigned char b[4]; if (fread(b, 1, 4, f) != 4) { fclose(f); return -1; }
        hlen = b[0] | (b[1] << 8) | ((unsigned long)b[2] << 16) | ((unsigned long)b[3] << 24);
    }
    char *h = malloc(hlen + 1);
    if (fread(h, 1, hlen, f) != hlen) { free(h); fclose(f); return -1; }
    h[hlen] = 0;
    char descr[16] = {0};
    char *d = strstr(h, "'descr': '");
    if (d) sscanf(d + 10, "%15[^']", descr);
    char *s = strstr(h, "'shape': (");
    a->ndim = 0; a->size = 1;
    if (s) {
        s += 10;
        while (*s && *s != ')') {
            char *end; long v = strtol(s, &end, 10);
            if (end == s) { s++; continue; }
            a->shape[a->ndim++] = v; a->size *= v; s = end;
        }
    }
    free(h);
    a->data = malloc(sizeof(double) * (a->size ? a->size : 1));
    a->text[0] = 0;
    long n = a->size;
    if (!strcmp(descr, "<f8")) {
        if (fread(a->data, 8, n, f) != (size_t)n) goto short_read;
    } else if (!strcmp(descr, "<f4") || !strcmp(descr, "<i8")) {
        int four = descr[2] == '4';
        for (long i = 0; i < n; i++) {
            float x; long long k;
            if (four ? fread(&x, 4, 1, f) != 1 : fread(&k, 8, 1, f) != 1) goto short_read;
            a->data[i] = four ? x : (double)k;
        }
    } else if (descr[0] == '<' && descr[1] == 'U') {
        long chars = atol(descr + 2);
        for (long i = 0; i < chars && i < 63; i++) {
            unsigned int c; if (fread(&c, 4, 1, f) != 1) goto short_read;
            a->text[i] = (char)c; a->text[i + 1] = 0;
        }
    } else {
        fclose(f); free(a->data);
        snprintf(error, sizeof error, "dtype %s of %s", descr, name); return 1;
    }
    fclose(f);
    return 0;
short_read:
    fclose(f); free(a->data);
    snprintf(error, sizeof error, "%s.npy is cut short", name); return -1;
}

static int save(const char *path, const long *shape, int ndim, const double *data, long n) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    char h[256];
    int len = snprintf(h, sizeof h, "{'descr': '<f8', 'fortran_order': False, 'shape': (");
    for (int i = 0; i < ndim; i++) len += snprintf(h + len, sizeof h - len, "%ld, ", shape[i]);
    len += snprintf(h + len, sizeof h - len, "), }");
    while ((10 + len + 1) % 64) h[len++] = ' ';
    h[len++] = '\n';
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, len & 255, len >> 8};
    fwrite(pre, 1, 10, f); fwrite(h, 1, len, f); fwrite(data, 8, n, f);
    return fclose(f);
}

/* One case: 0 ok, 1 unsupported, -1 error (error[] says why). */
static int conv2d(const char *dir, const char *out) {
    Array op, x, w, st, dl, pad, fmt, ex;
    if (load(dir, "op", &op)) return -1;
    free(op.data);
    if (strcmp(op.text, "Conv2D")) {
        snprintf(error, sizeof error, "this program computes Conv2D, not %s", op.text);
        return 1;
    }
    int r;
    if ((r = load(dir, "input", &x))) return r;
    if ((r = load(dir, "filter", &w))) return r;
    if (load(dir, "strides", &st) || load(dir, "dilations", &dl) || load(dir, "padding", &pad)
        || load(dir, "data_format", &fmt)) return -1;
    int explicit_ = !strcmp(pad.text, "EXPLICIT");
    if (explicit_ && load(dir, "explicit_paddings", &ex)) return -1;
    int nhwc = !strcmp(fmt.text, "NHWC");
    int hd = nhwc ? 1 : 2, wd = nhwc ? 2 : 3, cd = nhwc ? 3 : 1;
    long n = x.shape[0], h = x.shape[hd], wi = x.shape[wd], c = x.shape[cd];
    long kh = w.shape[0], kw = w.shape[1], fin = w.shape[2], fout = w.shape[3];
    long s[2] = {(long)st.data[hd], (long)st.data[wd]}, d[2] = {(long)dl.data[hd], (long)dl.data[wd]};
    long size[2] = {h, wi}, k[2] = {kh, kw}, lo[2], o[2];
    for (int i = 0; i < 2; i++) {
        long span = d[i] * (k[i] - 1) + 1, hi;
        if (!strcmp(pad.text, "SAME")) {
            long total = ((size[i] + s[i] - 1) / s[i] - 1) * s[i] + span - size[i];
            if (total < 0) total = 0;
            lo[i] = total / 2; hi = total - lo[i];
        } else if (explicit_) {
            int at = (nhwc ? 2 : 4) + 2 * i;
            lo[i] = (long)ex.data[at]; hi = (long)ex.data[at + 1];
        } else {
            lo[i] = hi = 0;
        }
        long room = size[i] + lo[i] + hi - span;
        o[i] = room < 0 ? 0 : room / s[i] + 1;
    }
    long groups = fin ? c / fin : 1, per = groups ? fout / groups : 0;
    long total = n * o[0] * o[1] * fout;
    double *y = calloc(total ? total : 1, sizeof(double));
    for (long b = 0; b < n; b++)
        for (long oy = 0; oy < o[0]; oy++)
            for (long ox = 0; ox < o[1]; ox++)
                for (long co = 0; co < fout; co++) {
                    long g = per ? co / per : 0;
                    double acc = 0;
                    for (long i = 0; i < kh; i++) {
                        long iy = oy * s[0] + i * d[0] - lo[0];
                        if (iy < 0 || iy >= h) continue;
                        for (long j = 0; j < kw; j++) {
                            long ix = ox * s[1] + j * d[1] - lo[1];
                            if (ix < 0 || ix >= wi) continue;
                            for (long ci = 0; ci < fin; ci++) {
                                long cc = g * fin + ci;
                                long xi = nhwc ? ((b * h + iy) * wi + ix) * c + cc
                                               : ((b * c + cc) * h + iy) * wi + ix;
                                acc += x.data[xi] * w.data[((i * kw + j) * fin + ci) * fout + co];
                            }
                        }
                    }
                    long yi = nhwc ? ((b * o[0] + oy) * o[1] + ox) * fout + co
                                   : ((b * fout + co) * o[0] + oy) * o[1] + ox;
                    y[yi] = acc;
                }
    long shape[4] = {n, o[0], o[1], fout};
    if (!nhwc) { shape[1] = fout; shape[2] = o[0]; shape[3] = o[1]; }
    r = save(out, shape, 4, y, total);
    free(y); free(x.data); free(w.data); free(st.data); free(dl.data); free(pad.data);
    free(fmt.data);
    if (explicit_) free(ex.data);
    if (r) { snprintf(error, sizeof error, "cannot write %.200s", out); return -1; }
    return 0;
}

int main(void) {
    static char in[4096], out[4096];
    while (scanf("%4095s %4095s", in, out) == 2) {
        int r = conv2d(in, out);
        if (r == 0) puts("ok");
        else printf("%s %s\n", r > 0 ? "unsupported" : "error", error);
        fflush(stdout);
    }
    return 0;
}
