/* parsers._fastscan: compiled scanners for line shapes read at a cost polars' regex engine cannot reach.
 *
 * Each scanner recognises exactly the lines of one regex of the pure-polars path (or a strict subset of
 * them), and converts its groups as that path's polars casts do. It stops at the first line it does not
 * accept, or whose value it cannot convert exactly (a date that does not exist, a number out of the fast
 * path's exact range): the caller then takes the polars path for the whole input, which decides what such
 * a line is. So the scanner never decides anything the polars path would decide otherwise; the tests check
 * it against that path (tests/test_fastscan.py).
 *
 * Input is an Arrow stream of strings (the PyCapsule interface: `Series.__arrow_c_stream__()`, read in place),
 * output caller-made buffers (the buffer protocol): the module needs neither numpy's nor Arrow's headers.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* 10^k, exact as doubles for k <= 22 */
static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* the small readers are inlined where they are used (constant literals compare in place) */
#define INLINE static inline __attribute__((always_inline))
#define IS_DIGIT(c) ((unsigned)((c) - '0') < 10u)
#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)
#define MAX_FIELDS 64 /* the most float outputs a line of any scanner here */

typedef struct {
    const uint8_t *p;
    const uint8_t *e;
    uint64_t m; /* the digits and scale of the last number `decimal` read: m / 10^k */
    int k;
} cursor;

INLINE int lit(cursor *c, const char *s, size_t n) {
    if ((size_t)(c->e - c->p) < n || memcmp(c->p, s, n) != 0)
        return 0;
    c->p += n;
    return 1;
}
#define LIT(c, s) lit((c), (s), sizeof(s) - 1)

/* ` +`: one space or more */
INLINE int spaces(cursor *c) {
    if (c->p >= c->e || *c->p != ' ')
        return 0;
    while (c->p < c->e && *c->p == ' ')
        c->p++;
    return 1;
}

/* `[0-9]{n}` as a number */
INLINE int fixed(cursor *c, int n, int *out) {
    int v = 0;
    if (c->e - c->p < n)
        return 0;
    for (int i = 0; i < n; i++) {
        uint8_t d = c->p[i];
        if (!IS_DIGIT(d))
            return 0;
        v = v * 10 + (d - '0');
    }
    c->p += n;
    *out = v;
    return 1;
}

/* `[0-9]+` as an integer of at most 18 digits (longer: not converted here) */
INLINE int integer(cursor *c, int64_t *out) {
    const uint8_t *s = c->p;
    int64_t v = 0;
    while (c->p < c->e && IS_DIGIT(*c->p)) {
        v = v * 10 + (*c->p - '0');
        c->p++;
        if (c->p - s > 18)
            return 0;
    }
    if (c->p == s)
        return 0;
    *out = v;
    return 1;
}

/* Digits into a mantissa (commas skipped where `commas`), counting those after the point. The value is
 * m / 10^k, a correctly rounded quotient of two exact doubles, so the nearest double to the decimal, as any
 * correct conversion (polars' included) gives, when m <= 2^53 and k <= 22; otherwise 0 (not converted). */
INLINE int decimal(cursor *c, int commas, double *out) {
    uint64_t m = 0;
    int k = 0;
    if (c->p >= c->e || !IS_DIGIT(*c->p))
        return 0;
    while (c->p < c->e && (IS_DIGIT(*c->p) || (commas && *c->p == ','))) {
        if (*c->p != ',') {
            if (m > (UINT64_C(1) << 53) / 10 + 1)
                return 0;
            m = m * 10 + (uint64_t)(*c->p - '0');
        }
        c->p++;
    }
    if (c->p < c->e && *c->p == '.') {
        /* `(?:\.[0-9]+)?`: a point without a digit after it ends the number before the point, where no
         * token of the shapes here can follow (so the line is not of the shape) */
        c->p++;
        if (c->p >= c->e || !IS_DIGIT(*c->p))
            return 0;
        while (c->p < c->e && IS_DIGIT(*c->p)) {
            if (m > (UINT64_C(1) << 53) / 10 + 1)
                return 0;
            m = m * 10 + (uint64_t)(*c->p - '0');
            k++;
            c->p++;
        }
    }
    if (m > (UINT64_C(1) << 53) || k > 22)
        return 0;
    *out = (double)m / POW10[k];
    c->m = m;
    c->k = k;
    return 1;
}

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    /* days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm) */
    y -= m <= 2;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static int days_in_month(int y, int m) {
    static const int dim[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
        return 29;
    return dim[m - 1];
}

/* `YYYY-MM-DD HH:MM:SS,mmm` (seconds `[0-5][0-9]`) as microseconds since the epoch, the wall time taken as
 * UTC; a date or time that does not exist is not converted */
static int datetime_ms(cursor *c, int64_t *out) {
    int y, mo, d, h, mi, s, ms;
    if (!fixed(c, 4, &y) || !LIT(c, "-") || !fixed(c, 2, &mo) || !LIT(c, "-") || !fixed(c, 2, &d) ||
        !LIT(c, " ") || !fixed(c, 2, &h) || !LIT(c, ":") || !fixed(c, 2, &mi) || !LIT(c, ":"))
        return 0;
    if (c->p >= c->e || *c->p < '0' || *c->p > '5')
        return 0;
    if (!fixed(c, 2, &s) || !LIT(c, ",") || !fixed(c, 3, &ms))
        return 0;
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59)
        return 0;
    int64_t days = days_from_civil(y, (unsigned)mo, (unsigned)d);
    *out = ((days * 86400 + h * 3600 + mi * 60 + s) * 1000 + ms) * 1000;
    return 1;
}

/* The digits and scale of the number a cursor read last, packed: m * 32 + k (m <= 2^53, k <= 22) */
#define DIGITS(c) ((int64_t)((c).m << 5 | (uint64_t)(c).k))

/* One torchtitan step line (`parsers.step_log._TITAN_LINE`, or `_TITAN_BARE` without the envelope):
 *   [rankR]:[titan] YYYY-MM-DD HH:MM:SS,mmm - root - INFO - step: +S +loss: +D +(grad_norm: +D +)?
 *   memory: +DGiB\([0-9.]+%\) +(tps|wps): +T +tflops: +D +mfu: +D%
 * i64: timestamp (us), step, rank (-1: no envelope), then the digits of grad_norm (-1: absent), mfu and
 * memory (`DIGITS`: for `json_objects`); f64: loss, grad_norm (NaN: absent), memory, throughput, tflops, mfu */

static int titan_line(const uint8_t *p, const uint8_t *e, const void *ctx, int64_t *i64, double *f64) {
    cursor c = {p, e, 0, 0};
    (void)ctx;
    int64_t rank = -1;
    if (LIT(&c, "[rank")) {
        if (!integer(&c, &rank) || rank > INT32_MAX || !LIT(&c, "]:"))
            return 0;
    }
    if (!LIT(&c, "[titan] ") || !datetime_ms(&c, &i64[0]))
        return 0;
    if (!LIT(&c, " - root - INFO - step:") || !spaces(&c) || !integer(&c, &i64[1]))
        return 0;
    i64[2] = rank;
    if (!spaces(&c) || !LIT(&c, "loss:") || !spaces(&c) || !decimal(&c, 0, &f64[0]) || !spaces(&c))
        return 0;
    f64[1] = Py_NAN;
    i64[3] = -1;
    if (LIT(&c, "grad_norm:")) {
        if (!spaces(&c) || !decimal(&c, 0, &f64[1]) || !spaces(&c))
            return 0;
        i64[3] = DIGITS(c);
    }
    if (!LIT(&c, "memory:") || !spaces(&c) || !decimal(&c, 0, &f64[2]) || !LIT(&c, "GiB("))
        return 0;
    i64[5] = DIGITS(c);
    const uint8_t *pct = c.p;
    while (c.p < c.e && (IS_DIGIT(*c.p) || *c.p == '.'))
        c.p++;
    if (c.p == pct || !LIT(&c, "%)") || !spaces(&c))
        return 0;
    if (!LIT(&c, "tps:") && !LIT(&c, "wps:"))
        return 0;
    if (!spaces(&c) || !decimal(&c, 1, &f64[3]) || !spaces(&c))
        return 0;
    if (!LIT(&c, "tflops:") || !spaces(&c) || !decimal(&c, 0, &f64[4]) || !spaces(&c))
        return 0;
    if (!LIT(&c, "mfu:") || !spaces(&c) || !decimal(&c, 0, &f64[5]) || !LIT(&c, "%"))
        return 0;
    i64[4] = DIGITS(c);
    return c.p == c.e;
}

/* The first `needle` (nlen bytes, 2 or more) in [s, e), or NULL: its first 2 bytes looked for in words of 8
 * (the zero-byte test of each byte pair against them: a false flag only above a true one, so the lowest flag
 * is a match of the pair), then the rest compared */
static const uint8_t *find_bytes(const uint8_t *s, const uint8_t *e, const char *needle, size_t nlen) {
    const uint64_t b0 = ONES * (uint8_t)needle[0], b1 = ONES * (uint8_t)needle[1];
    const uint8_t *p = s;
    for (; e - p >= 9; p += 8) {
        uint64_t w, w1;
        memcpy(&w, p, 8);
        memcpy(&w1, p + 1, 8);
        uint64_t x = w ^ b0, y = w1 ^ b1;
        uint64_t m = ((x - ONES) & ~x & HIGHS) & ((y - ONES) & ~y & HIGHS);
        while (m) {
            const uint8_t *q = p + (__builtin_ctzll(m) >> 3);
            if (e - q >= (int64_t)nlen && memcmp(q, needle, nlen) == 0)
                return q;
            m &= m - 1;
        }
    }
    for (; e - p >= (int64_t)nlen; p++)
        if (p[0] == (uint8_t)needle[0] && memcmp(p, needle, nlen) == 0)
            return p;
    return NULL;
}

/* One Megatron `(min, max)` timer entry line (`parsers.step_log._MEG_E`, cut at its first `: (` as
 * `_meg_entries_heads` cuts it): i64 the byte offset of that first `: (` and whether the part after it is
 * `_MEG_E_TAIL` (`^D, D\)$`, D `[0-9]+(?:\.[0-9]+)?`: 1, else 0); f64 its two numbers (NaN where it is not).
 * A line without `: (`, or whose numbers the fast path does not convert exactly, is not read. */
static int meg_entry_line(const uint8_t *p, const uint8_t *e, const void *ctx, int64_t *i64, double *f64) {
    (void)ctx;
    const uint8_t *s = find_bytes(p, e, ": (", 3);
    if (s == NULL)
        return 0;
    i64[0] = s - p;
    i64[1] = 0;
    f64[0] = f64[1] = Py_NAN;
    cursor c = {s + 3, e, 0, 0};
    /* the tail's shape first (a line that is no entry is read, as not one); then its values */
    const uint8_t *t = c.p;
    int parts = 0;
    while (parts < 2) {
        const uint8_t *d = t;
        while (t < e && IS_DIGIT(*t))
            t++;
        if (t == d)
            return 1;
        if (t < e && *t == '.') {
            t++;
            d = t;
            while (t < e && IS_DIGIT(*t))
                t++;
            if (t == d)
                return 1;
        }
        parts++;
        if (parts == 1) {
            if (e - t < 2 || t[0] != ',' || t[1] != ' ')
                return 1;
            t += 2;
        }
    }
    if (e - t != 1 || *t != ')')
        return 1;
    if (!decimal(&c, 0, &f64[0]) || !LIT(&c, ", ") || !decimal(&c, 0, &f64[1]))
        return 0; /* of the shape, a number beyond the fast path: not read */
    i64[1] = 1;
    return 1;
}

/* `-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?`, the value m * 10^(e - k) exact where m <= 2^53 and
 * |e - k| <= 22 (one correctly rounded product or quotient of exact doubles); 1 read, 0 not of the form
 * (the cursor then anywhere), -1 of the form but not converted here */
static int sci_number(cursor *c, double *out) {
    int neg = 0, k = 0, big = 0;
    uint64_t m = 0;
    if (c->p < c->e && *c->p == '-') {
        neg = 1;
        c->p++;
    }
    const uint8_t *d = c->p;
    while (c->p < c->e && IS_DIGIT(*c->p)) {
        if (m > (UINT64_C(1) << 53) / 10 + 1)
            big = 1;
        else
            m = m * 10 + (uint64_t)(*c->p - '0');
        c->p++;
    }
    if (c->p == d)
        return 0;
    if (c->p < c->e && *c->p == '.') {
        c->p++;
        d = c->p;
        while (c->p < c->e && IS_DIGIT(*c->p)) {
            if (m > (UINT64_C(1) << 53) / 10 + 1)
                big = 1;
            else
                m = m * 10 + (uint64_t)(*c->p - '0');
            k++;
            c->p++;
        }
        if (c->p == d)
            return 0;
    }
    long e = 0;
    if (c->p < c->e && (*c->p == 'e' || *c->p == 'E')) {
        int eneg = 0;
        c->p++;
        if (c->p < c->e && (*c->p == '-' || *c->p == '+')) {
            eneg = *c->p == '-';
            c->p++;
        }
        d = c->p;
        while (c->p < c->e && IS_DIGIT(*c->p)) {
            if (e < 100000)
                e = e * 10 + (*c->p - '0');
            c->p++;
        }
        if (c->p == d)
            return 0;
        if (eneg)
            e = -e;
    }
    long x = e - k;
    if (big || m > (UINT64_C(1) << 53) || x > 22 || x < -22)
        return -1;
    double v = x >= 0 ? (double)m * POW10[x] : (double)m / POW10[-x];
    *out = neg ? -v : v;
    return 1;
}

/* ` *`: any spaces */
static void blanks(cursor *c) {
    while (c->p < c->e && *c->p == ' ')
        c->p++;
}

typedef struct {
    Py_ssize_t count;
    const char **name;
    Py_ssize_t *len;
} meg_names;

/* One Megatron iteration line laid out as `parsers.step_log._megatron_fast`'s regex for the field names
 * `names` has it:
 *   ^ *(?:\[[0-9-]+ [0-9:]+\] +)?iteration +[0-9]+ *[/] *[0-9]+ *\|( *NAME: *V *\|)... *$
 * (V `[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?`): i64 1 where it is (0 where not), f64 the
 * fields' values (NaN where not). A line of the layout whose value is not `sci_number`'s, or is beyond
 * its exact range, is not read (the regex path decides). */
static int meg_iter_line(const uint8_t *p, const uint8_t *e, const void *ctx, int64_t *ok, double *f64) {
    const meg_names *names = (const meg_names *)ctx;
    cursor c = {p, e, 0, 0};
    *ok = 0;
    for (Py_ssize_t j = 0; j < names->count; j++)
        f64[j] = Py_NAN;
    blanks(&c);
    if (c.p < c.e && *c.p == '[') {
        c.p++;
        const uint8_t *d = c.p;
        while (c.p < c.e && (IS_DIGIT(*c.p) || *c.p == '-'))
            c.p++;
        if (c.p == d || !LIT(&c, " "))
            return 1;
        d = c.p;
        while (c.p < c.e && (IS_DIGIT(*c.p) || *c.p == ':'))
            c.p++;
        if (c.p == d || !LIT(&c, "]") || !spaces(&c))
            return 1;
    }
    if (!LIT(&c, "iteration") || !spaces(&c))
        return 1;
    const uint8_t *d = c.p;
    while (c.p < c.e && IS_DIGIT(*c.p))
        c.p++;
    if (c.p == d)
        return 1;
    blanks(&c);
    if (!LIT(&c, "/"))
        return 1;
    blanks(&c);
    d = c.p;
    while (c.p < c.e && IS_DIGIT(*c.p))
        c.p++;
    if (c.p == d)
        return 1;
    blanks(&c);
    if (!LIT(&c, "|"))
        return 1;
    int convert = 1;
    for (Py_ssize_t j = 0; j < names->count; j++) {
        blanks(&c);
        if (!lit(&c, names->name[j], (size_t)names->len[j]) || !LIT(&c, ":"))
            return 1;
        blanks(&c);
        /* V's full form first (what the regex takes), then whether sci_number converts it */
        const uint8_t *v = c.p;
        if (c.p < c.e && (*c.p == '-' || *c.p == '+'))
            c.p++;
        const uint8_t *m = c.p;
        while (c.p < c.e && IS_DIGIT(*c.p))
            c.p++;
        int int_digits = c.p > m;
        if (c.p < c.e && *c.p == '.') {
            c.p++;
            const uint8_t *f = c.p;
            while (c.p < c.e && IS_DIGIT(*c.p))
                c.p++;
            if (!int_digits && c.p == f)
                return 1;
        } else if (!int_digits) {
            return 1;
        }
        if (c.p < c.e && (*c.p == 'e' || *c.p == 'E')) {
            /* an exponent without digits is no part of V, whose end then meets `e`: not the layout */
            const uint8_t *x = c.p + 1;
            if (x < c.e && (*x == '-' || *x == '+'))
                x++;
            if (x >= c.e || !IS_DIGIT(*x))
                return 1;
            while (x < c.e && IS_DIGIT(*x))
                x++;
            c.p = x;
        }
        const uint8_t *v_end = c.p;
        blanks(&c);
        if (!LIT(&c, "|"))
            return 1;
        if (convert) {
            cursor vc = {v, v_end, 0, 0};
            if (sci_number(&vc, &f64[j]) != 1 || vc.p != v_end)
                convert = 0;
        }
    }
    blanks(&c);
    if (c.p != c.e)
        return 1;
    if (!convert)
        return 0; /* of the layout, a value not converted here */
    *ok = 1;
    return 1;
}

/* ---- the Arrow C data and stream interfaces (https://arrow.apache.org/docs/format/CDataInterface.html) */
struct ArrowSchema {
    const char *format;
    const char *name;
    const char *metadata;
    int64_t flags;
    int64_t n_children;
    struct ArrowSchema **children;
    struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};

struct ArrowArray {
    int64_t length;
    int64_t null_count;
    int64_t offset;
    int64_t n_buffers;
    int64_t n_children;
    const void **buffers;
    struct ArrowArray **children;
    struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

struct ArrowArrayStream {
    int (*get_schema)(struct ArrowArrayStream *, struct ArrowSchema *out);
    int (*get_next)(struct ArrowArrayStream *, struct ArrowArray *out);
    const char *(*get_last_error)(struct ArrowArrayStream *);
    void (*release)(struct ArrowArrayStream *);
    void *private_data;
};

/* ---- strings out: an Arrow string-view array over buffers this module allocated, for polars to import
 * (`pl.Series` of an object whose `__arrow_c_array__` gives the two capsules). Its release only frees
 * memory (no Python object behind it), so it may run on any thread, without the interpreter's lock. */

typedef struct {
    uint8_t *data;          /* the strings' bytes (those of more than 12 bytes are read from here) */
    uint8_t *views;         /* 16 bytes a string */
    int64_t sizes[1];       /* the data buffer's length (the variadic buffer sizes) */
    const void *buffers[4]; /* validity (none), views, data, sizes */
} view_array;

static void release_view_array(struct ArrowArray *a) {
    view_array *v = a->private_data;
    free(v->data);
    free(v->views);
    free(v);
    a->release = NULL;
}

static void release_static_schema(struct ArrowSchema *s) { s->release = NULL; }

static void schema_capsule_free(PyObject *capsule) {
    struct ArrowSchema *s = PyCapsule_GetPointer(capsule, "arrow_schema");
    if (s == NULL) {
        PyErr_Clear();
        return;
    }
    if (s->release)
        s->release(s);
    free(s);
}

static void array_capsule_free(PyObject *capsule) {
    struct ArrowArray *a = PyCapsule_GetPointer(capsule, "arrow_array");
    if (a == NULL) {
        PyErr_Clear();
        return;
    }
    if (a->release)
        a->release(a);
    free(a);
}

/* A view for string i: bytes data[start:start + len] (len < 2^31, start < 2^31) */
static void put_view(uint8_t *views, int64_t i, const uint8_t *data, int64_t start, int64_t len) {
    uint8_t *v = views + 16 * i;
    int32_t n = (int32_t)len;
    memset(v, 0, 16);
    memcpy(v, &n, 4);
    if (len <= 12) {
        memcpy(v + 4, data + start, (size_t)len);
    } else {
        int32_t b = 0, o = (int32_t)start;
        memcpy(v + 4, data + start, 4);
        memcpy(v + 8, &b, 4);
        memcpy(v + 12, &o, 4);
    }
}

/* The (schema, array) capsules of a string-view array of n strings whose views and data (`len` bytes) the
 * caller malloc'ed and hands over (freed here on failure); NULL with an exception set on failure */
static PyObject *view_capsules(uint8_t *data, int64_t len, uint8_t *views, int64_t n) {
    view_array *v = malloc(sizeof(view_array));
    struct ArrowSchema *s = malloc(sizeof(struct ArrowSchema));
    struct ArrowArray *a = malloc(sizeof(struct ArrowArray));
    if (v == NULL || s == NULL || a == NULL) {
        free(v), free(s), free(a), free(data), free(views);
        return PyErr_NoMemory();
    }
    *v = (view_array){data, views, {len}, {NULL, views, data, NULL}};
    v->buffers[3] = v->sizes;
    *s = (struct ArrowSchema){"vu", "", NULL, 2 /* nullable */, 0, NULL, NULL, release_static_schema, NULL};
    *a = (struct ArrowArray){n, 0, 0, 4, 0, v->buffers, NULL, NULL, release_view_array, v};
    PyObject *sc = PyCapsule_New(s, "arrow_schema", schema_capsule_free);
    if (sc == NULL) {
        release_view_array(a);
        free(a), free(s);
        return NULL;
    }
    PyObject *ac = PyCapsule_New(a, "arrow_array", array_capsule_free);
    if (ac == NULL) {
        Py_DECREF(sc);
        release_view_array(a);
        free(a);
        return NULL;
    }
    PyObject *out = PyTuple_Pack(2, sc, ac);
    Py_DECREF(sc);
    Py_DECREF(ac);
    return out;
}

enum { FMT_UTF8, FMT_LARGE_UTF8, FMT_UTF8_VIEW };

/* The bytes of string i of one chunk (`fmt` its layout), or 0 where they are not there as expected */
INLINE int string_at(const struct ArrowArray *a, int fmt, int64_t i, const uint8_t **s, int64_t *len) {
    int64_t j = a->offset + i;
    if (fmt == FMT_UTF8_VIEW) {
        /* a view: int32 length, then the 12 bytes inline, or a 4-byte prefix, int32 buffer index, int32
         * offset in that buffer (the data buffers are buffers[2 .. n_buffers-2]) */
        const uint8_t *v = (const uint8_t *)a->buffers[1] + 16 * j;
        int32_t n;
        memcpy(&n, v, 4);
        if (n < 0)
            return 0;
        if (n <= 12) {
            *s = v + 4;
        } else {
            int32_t b, o;
            memcpy(&b, v + 8, 4);
            memcpy(&o, v + 12, 4);
            if (b < 0 || o < 0 || 2 + (int64_t)b >= a->n_buffers - 1 || a->buffers[2 + b] == NULL)
                return 0;
            *s = (const uint8_t *)a->buffers[2 + b] + o;
        }
        *len = n;
        return 1;
    }
    int64_t start, end;
    if (fmt == FMT_LARGE_UTF8) {
        const int64_t *off = (const int64_t *)a->buffers[1];
        start = off[j];
        end = off[j + 1];
    } else {
        const int32_t *off = (const int32_t *)a->buffers[1];
        start = off[j];
        end = off[j + 1];
    }
    if (start < 0 || end < start)
        return 0;
    *s = a->buffers[2] ? (const uint8_t *)a->buffers[2] + start : (const uint8_t *)"";
    *len = end - start;
    return 1;
}

/* The layout of an Arrow stream's strings (FMT_*), or -1 with an exception set (the stream left as it is) */
static int stream_format(struct ArrowArrayStream *stream) {
    struct ArrowSchema schema;
    if (stream->get_schema(stream, &schema) != 0) {
        PyErr_SetString(PyExc_ValueError, "the Arrow stream gave no schema");
        return -1;
    }
    int fmt;
    if (strcmp(schema.format, "u") == 0)
        fmt = FMT_UTF8;
    else if (strcmp(schema.format, "U") == 0)
        fmt = FMT_LARGE_UTF8;
    else if (strcmp(schema.format, "vu") == 0)
        fmt = FMT_UTF8_VIEW;
    else
        fmt = -1;
    if (schema.release)
        schema.release(&schema);
    if (fmt < 0)
        PyErr_SetString(PyExc_TypeError, "the Arrow stream does not hold strings");
    return fmt;
}

/* The Arrow stream of strings in a PyCapsule "arrow_array_stream" and its layout (*fmt), for the caller to
 * read and release; NULL with an exception set (a stream already consumed, or of no strings: released) */
static struct ArrowArrayStream *open_stream(PyObject *capsule, int *fmt) {
    struct ArrowArrayStream *stream =
        (struct ArrowArrayStream *)PyCapsule_GetPointer(capsule, "arrow_array_stream");
    if (stream == NULL)
        return NULL;
    if (stream->release == NULL) {
        PyErr_SetString(PyExc_ValueError, "the Arrow stream was already consumed");
        return NULL;
    }
    *fmt = stream_format(stream);
    if (*fmt < 0) {
        stream->release(stream);
        return NULL;
    }
    return stream;
}

typedef int (*line_scanner)(const uint8_t *p, const uint8_t *e, const void *ctx, int64_t *i64, double *f64);

/* Scan the strings of an Arrow stream (a PyCapsule "arrow_array_stream" of strings: utf8, large utf8 or
 * utf8 view, no null) with `scan`, writing line i's k-th integer to i64[k*n + i] and k-th float to
 * f64[k*n + i]; how many lines from the first it read (n: all), or -1 with an exception set. */
static Py_ssize_t scan_stream(PyObject *capsule, Py_ssize_t n, line_scanner scan, const void *ctx, int n_i64,
                              int n_f64, int64_t *o64, double *of) {
    int fmt;
    struct ArrowArrayStream *stream = open_stream(capsule, &fmt);
    if (stream == NULL)
        return -1;
    Py_ssize_t done = 0;
    int stop = 0, bad = 0;
    while (!stop) {
        struct ArrowArray a;
        if (stream->get_next(stream, &a) != 0) {
            bad = 1;
            break;
        }
        if (a.release == NULL)  /* the end of the stream */
            break;
        if (a.null_count != 0 || a.length > n - done || a.n_buffers < 3) {
            stop = 1;  /* a null line, or more lines than said: not read here */
        } else {
            Py_BEGIN_ALLOW_THREADS;
            for (int64_t i = 0; i < a.length; i++, done++) {
                const uint8_t *s;
                int64_t len;
                int64_t iv[8];
                double fv[MAX_FIELDS];
                if (!string_at(&a, fmt, i, &s, &len) || !scan(s, s + len, ctx, iv, fv)) {
                    stop = 1;
                    break;
                }
                for (int k = 0; k < n_i64; k++)
                    o64[k * n + done] = iv[k];
                for (int k = 0; k < n_f64; k++)
                    of[k * n + done] = fv[k];
            }
            Py_END_ALLOW_THREADS;
        }
        a.release(&a);
    }
    stream->release(stream);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "the Arrow stream failed");
        return -1;
    }
    return done;
}

/* `scan_stream` into the caller's writable buffers `i64_o` (n_i64 * n int64) and `f64_o` (n_f64 * n float64),
 * checked first: how many lines it read, as a Python int, or NULL with an exception set */
static PyObject *scan_into(PyObject *capsule, Py_ssize_t n, PyObject *i64_o, PyObject *f64_o, line_scanner scan,
                           const void *ctx, int n_i64, int n_f64, const char *what) {
    Py_buffer i64b, f64b;
    if (PyObject_GetBuffer(i64_o, &i64b, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (PyObject_GetBuffer(f64_o, &f64b, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&i64b);
        return NULL;
    }
    Py_ssize_t done = -1;
    if (n < 0 || i64b.len < n_i64 * n * (Py_ssize_t)sizeof(int64_t) ||
        f64b.len < n_f64 * n * (Py_ssize_t)sizeof(double))
        PyErr_Format(PyExc_ValueError, "%s: output buffers too short for n lines", what);
    else
        done = scan_stream(capsule, n, scan, ctx, n_i64, n_f64, (int64_t *)i64b.buf, (double *)f64b.buf);
    PyBuffer_Release(&i64b);
    PyBuffer_Release(&f64b);
    if (done < 0)
        return NULL;
    return PyLong_FromSsize_t(done);
}

/* A scanner's Python entry `name(stream, n, i64, f64)`: its arguments parsed, then `scan_into` without a
 * context */
static PyObject *scan_args(PyObject *args, line_scanner scan, int n_i64, int n_f64, const char *what) {
    PyObject *capsule, *i64_o, *f64_o;
    Py_ssize_t n;
    if (!PyArg_ParseTuple(args, "OnOO", &capsule, &n, &i64_o, &f64_o))
        return NULL;
    return scan_into(capsule, n, i64_o, f64_o, scan, NULL, n_i64, n_f64, what);
}

PyDoc_STRVAR(titan_doc,
             "titan(stream, n, i64, f64) -> int\n\n"
             "Scan the n strings of an Arrow stream (`Series.__arrow_c_stream__()`) as torchtitan step\n"
             "lines, writing each line's timestamp (us), step and rank (-1: none) to i64[i], i64[n + i],\n"
             "i64[2n + i], the digits of its grad_norm (-1: none), mfu and memory (m * 32 + k: the number\n"
             "m / 10^k, for `json_objects`) to i64[3n + i] ... i64[5n + i], and its loss, grad_norm (NaN:\n"
             "none), memory, throughput, tflops and mfu to\n"
             "f64[k*n + i] (writable buffers of int64 and float64). Returns how many lines from the first\n"
             "it read: n when all.");

static PyObject *titan(PyObject *self, PyObject *args) {
    (void)self;
    return scan_args(args, titan_line, 6, 6, "titan");
}

PyDoc_STRVAR(meg_entries_doc,
             "meg_entries(stream, n, i64, f64) -> int\n\n"
             "Cut the n strings of an Arrow stream at their first ': (' as Megatron (min, max) timer entries:\n"
             "i64[i] the byte offset of that ': (', i64[n + i] 1 where the rest is `D, D)` (else 0),\n"
             "f64[i], f64[n + i] its two numbers (NaN: not of that shape). Returns how many lines from the\n"
             "first it read: n when all (a line without ': (' or with a number it does not convert stops it).");

static PyObject *meg_entries(PyObject *self, PyObject *args) {
    (void)self;
    return scan_args(args, meg_entry_line, 2, 2, "meg_entries");
}

PyDoc_STRVAR(meg_iterations_doc,
             "meg_iterations(stream, n, names, i64, f64) -> int\n\n"
             "Read the n strings of an Arrow stream as Megatron iteration lines laid out with the fields\n"
             "`names` (a list of bytes, in order: `| name: value |`): i64[i] 1 where a line is (else 0),\n"
             "f64[j*n + i] its field j's value (NaN where it is not). Returns how many lines from the first it\n"
             "read: n when all (a line of the layout with a value it does not convert stops it).");

static PyObject *meg_iterations(PyObject *self, PyObject *args) {
    PyObject *capsule, *names_o, *i64_o, *f64_o;
    Py_ssize_t n;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnO!OO", &capsule, &n, &PyList_Type, &names_o, &i64_o, &f64_o))
        return NULL;
    Py_ssize_t k = PyList_GET_SIZE(names_o);
    if (k < 1 || k > MAX_FIELDS) {
        PyErr_SetString(PyExc_ValueError, "meg_iterations: 1 to 64 field names");
        return NULL;
    }
    const char *name[MAX_FIELDS];
    Py_ssize_t len[MAX_FIELDS];
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *b = PyList_GET_ITEM(names_o, j);
        if (!PyBytes_Check(b)) {
            PyErr_SetString(PyExc_TypeError, "meg_iterations: names must be bytes");
            return NULL;
        }
        name[j] = PyBytes_AS_STRING(b);
        len[j] = PyBytes_GET_SIZE(b);
    }
    meg_names names = {k, name, len};
    return scan_into(capsule, n, i64_o, f64_o, meg_iter_line, &names, 1, (int)k, "meg_iterations");
}

/* ---- csv_cells: the cells of `--query-gpu` CSV rows, numbered per column in order of appearance */

typedef struct {
    const uint8_t *s; /* the cell's bytes (in a chunk held until the end) */
    int64_t len;
    uint64_t first; /* its first 8 bytes (`cell_end`) */
    uint64_t hash;
} cell_ref;

typedef struct {
    uint32_t *slot;  /* code + 1 of the cell in each slot, 0: empty */
    uint64_t mask;   /* slots - 1 (a power of two) */
    cell_ref *uniq;  /* the distinct cells, in order of appearance */
    int64_t n_uniq, cap_uniq;
    int64_t last;    /* the code of the column's previous cell (-1: none) */
} cell_table;


#define HASH_K UINT64_C(0x9E3779B97F4A7C15)

/* The end of the cell that starts at p (the next comma, or e), its first 8 bytes as a word (zeros above a
 * shorter cell's bytes) and its bytes' hash: (h ^ w) * K over its words, 8 bytes at a time from its start
 * (the last as a word of zeros above its bytes). Words are read only within the line; the lowest byte
 * flagged by the zero-byte test of `w ^ ',,,,,,,,'` is the first comma (a false flag only ever lies above a
 * true one). The table's slot is taken from the hash's high bits (`cell_code`). */
static inline const uint8_t *cell_end(const uint8_t *p, const uint8_t *e, uint64_t *first, uint64_t *hash) {
    uint64_t h = 0, w0 = 0;
    int words = 0;
    while (e - p >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        uint64_t x = w ^ (ONES * ','), m = (x - ONES) & ~x & HIGHS;
        if (m) {
            int nb = __builtin_ctzll(m) >> 3;
            w &= nb ? (UINT64_C(1) << (8 * nb)) - 1 : 0;
            *first = words ? w0 : w;
            *hash = (h ^ w) * HASH_K;
            return p + nb;
        }
        if (!words++)
            w0 = w;
        h = (h ^ w) * HASH_K;
        p += 8;
    }
    uint64_t w = 0;
    int nb = 0;
    while (p < e && *p != ',') {
        w |= (uint64_t)*p << (8 * nb++);
        p++;
    }
    *first = words ? w0 : w;
    *hash = (h ^ w) * HASH_K;
    return p;
}

static inline int same_bytes(const uint8_t *a, const uint8_t *b, int64_t len) {
    while (len >= 8) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y)
            return 0;
        a += 8;
        b += 8;
        len -= 8;
    }
    while (len-- > 0)
        if (*a++ != *b++)
            return 0;
    return 1;
}

/* A hash's first slot in a table of mask + 1 slots (its high bits folded in: a multiplication mixes up) */
static inline uint64_t slot_of(uint64_t hash, uint64_t mask) { return (hash >> 32 ^ hash) & mask; }

/* A table of `slots` slots (a power of two) for n items whose hashes lie `stride` bytes apart from `hash0`
 * (a field of an array of structs): item k + 1 in the first free slot from its hash's `slot_of`; NULL when out
 * of memory */
static uint32_t *reslot(const uint64_t *hash0, size_t stride, int64_t n, uint64_t slots) {
    uint32_t *slot = calloc(slots, sizeof(uint32_t));
    if (slot == NULL)
        return NULL;
    for (int64_t k = 0; k < n; k++) {
        uint64_t h;
        memcpy(&h, (const char *)hash0 + (size_t)k * stride, sizeof h);
        uint64_t at = slot_of(h, slots - 1);
        while (slot[at])
            at = (at + 1) & (slots - 1);
        slot[at] = (uint32_t)k + 1;
    }
    return slot;
}

static int table_grow(cell_table *t) {
    uint64_t slots = (t->mask + 1) * 2;
    uint32_t *slot = reslot(&t->uniq[0].hash, sizeof(cell_ref), t->n_uniq, slots);
    if (slot == NULL)
        return 0;
    free(t->slot);
    t->slot = slot;
    t->mask = slots - 1;
    return 1;
}

/* A cell is the distinct cell r: the same length and bytes (the first 8 as a word, `cell_end`) */
static inline int same_cell(const cell_ref *r, const uint8_t *s, int64_t len, uint64_t first) {
    return r->len == len && r->first == first && (len <= 8 || same_bytes(r->s + 8, s + 8, len - 8));
}

/* The code of a cell (its first word and hash: `cell_end`) in its column's table (added when new), or -1
 * where memory runs out */
static inline int64_t cell_code(cell_table *t, const uint8_t *s, int64_t len, uint64_t first, uint64_t h) {
    if (t->last >= 0 && same_cell(&t->uniq[t->last], s, len, first))
        return t->last;
    uint64_t at = slot_of(h, t->mask);
    while (t->slot[at]) {
        const cell_ref *r = &t->uniq[t->slot[at] - 1];
        if (r->hash == h && same_cell(r, s, len, first))
            return t->last = t->slot[at] - 1;
        at = (at + 1) & t->mask;
    }
    if (t->n_uniq == t->cap_uniq) {
        int64_t cap = t->cap_uniq * 2;
        cell_ref *u = realloc(t->uniq, (size_t)cap * sizeof(cell_ref));
        if (u == NULL)
            return -1;
        t->uniq = u;
        t->cap_uniq = cap;
    }
    int64_t code = t->n_uniq++;
    t->uniq[code] = (cell_ref){s, len, first, h};
    t->slot[at] = (uint32_t)code + 1;
    if ((uint64_t)t->n_uniq * 2 > t->mask + 1 && !table_grow(t))
        return -1;
    return t->last = code;
}

PyDoc_STRVAR(csv_cells_doc,
             "csv_cells(stream, n, fields, codes, ok, raw=None, lens=None) -> list[list[str]]\n\n"
             "Cut the n strings of an Arrow stream (`Series.__arrow_c_stream__()`, no null) at every comma, as\n"
             "`str.split_exact(',', fields)` does. A line of exactly `fields` cells gets ok[i] = 1 (a writable\n"
             "buffer of n uint8; else 0) and its cell k the code codes[k*n + i] (a writable buffer of fields * n\n"
             "uint32; 0 on a line not ok): the cell's place among the distinct cells of column k in order of\n"
             "appearance, which the list returned holds per column (the cells of the lines ok only). The columns\n"
             "k with raw[k] != 0 (`raw`: bytes of `fields` flags) are not numbered: codes[k*n + i] is the offset\n"
             "of the cell in its line and lens[k*n + i] its length (`lens`: as `codes`), both in characters (as\n"
             "`str.slice` takes them), and their lists are empty.");

/* The characters (UTF-8: the bytes that do not continue one) of s[0:len] */
static uint32_t chars_in(const uint8_t *s, int64_t len) {
    uint32_t c = 0;
    for (int64_t i = 0; i < len; i++)
        c += (s[i] & 0xC0) != 0x80;
    return c;
}

/* Whether s[0:len] holds a byte of 0x80 or more */
static int non_ascii(const uint8_t *s, int64_t len) {
    uint64_t acc = 0;
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t w;
        memcpy(&w, s + i, 8);
        acc |= w;
    }
    for (; i < len; i++)
        acc |= s[i];
    return (acc & HIGHS) != 0;
}

static PyObject *csv_cells(PyObject *self, PyObject *args) {
    PyObject *capsule, *codes_o, *ok_o, *raw_o = Py_None, *lens_o = Py_None;
    Py_ssize_t n, fields;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnnOO|OO", &capsule, &n, &fields, &codes_o, &ok_o, &raw_o, &lens_o))
        return NULL;
    if (n < 0 || fields < 1 || fields > 4096 || n > (Py_ssize_t)UINT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "csv_cells: 1 to 4096 fields, at most 2^32 - 1 lines");
        return NULL;
    }
    const char *raw = NULL;
    int any_raw = 0;
    if (raw_o != Py_None) {
        if (!PyBytes_Check(raw_o) || PyBytes_GET_SIZE(raw_o) != fields || lens_o == Py_None) {
            PyErr_SetString(PyExc_ValueError, "csv_cells: raw must be bytes of one flag a field, with lens");
            return NULL;
        }
        raw = PyBytes_AS_STRING(raw_o);
        for (Py_ssize_t k = 0; k < fields; k++)
            any_raw |= raw[k] != 0;
    }
    int fmt;
    struct ArrowArrayStream *stream = open_stream(capsule, &fmt);
    if (stream == NULL)
        return NULL;
    Py_buffer codes_b, ok_b, lens_b = {0};
    if (PyObject_GetBuffer(codes_o, &codes_b, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        stream->release(stream);
        return NULL;
    }
    if (PyObject_GetBuffer(ok_o, &ok_b, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&codes_b);
        stream->release(stream);
        return NULL;
    }
    if (any_raw && PyObject_GetBuffer(lens_o, &lens_b, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        PyBuffer_Release(&codes_b);
        PyBuffer_Release(&ok_b);
        stream->release(stream);
        return NULL;
    }
    PyObject *result = NULL;
    struct ArrowArray *chunks = NULL;
    int64_t n_chunks = 0, cap_chunks = 0;
    cell_table *tables = calloc((size_t)fields, sizeof(cell_table));
    /* each cell's start, length and hash (one more than the fields: a comma too many) */
    const uint8_t **cut = malloc((size_t)(fields + 1) * sizeof(uint8_t *));
    int64_t *cut_len = malloc((size_t)(fields + 1) * sizeof(int64_t));
    uint64_t *hash = malloc((size_t)(fields + 1) * sizeof(uint64_t));
    uint64_t *first = malloc((size_t)(fields + 1) * sizeof(uint64_t));
    const char *failed = NULL;
    if (codes_b.len < (Py_ssize_t)(fields * n * sizeof(uint32_t)) || ok_b.len < n ||
        (any_raw && lens_b.len < (Py_ssize_t)(fields * n * sizeof(uint32_t)))) {
        failed = "csv_cells: output buffers too short";
        goto done;
    }
    if (tables == NULL || cut == NULL || cut_len == NULL || hash == NULL || first == NULL) {
        failed = "";
        goto done;
    }
    for (Py_ssize_t k = 0; k < fields; k++) {
        tables[k].slot = calloc(1024, sizeof(uint32_t));
        tables[k].mask = 1023;
        tables[k].uniq = malloc(256 * sizeof(cell_ref));
        tables[k].cap_uniq = 256;
        tables[k].last = -1;
        if (tables[k].slot == NULL || tables[k].uniq == NULL) {
            failed = "";
            goto done;
        }
    }
    uint32_t *codes = (uint32_t *)codes_b.buf, *lens = any_raw ? (uint32_t *)lens_b.buf : NULL;
    uint8_t *ok = (uint8_t *)ok_b.buf;
    int64_t row = 0;
    for (;;) {
        if (n_chunks == cap_chunks) {
            cap_chunks = cap_chunks ? cap_chunks * 2 : 8;
            struct ArrowArray *c = realloc(chunks, (size_t)cap_chunks * sizeof(struct ArrowArray));
            if (c == NULL) {
                failed = "";
                goto done;
            }
            chunks = c;
        }
        struct ArrowArray *a = &chunks[n_chunks];
        if (stream->get_next(stream, a) != 0) {
            failed = "the Arrow stream failed";
            goto done;
        }
        if (a->release == NULL)
            break;
        n_chunks++;
        if (a->null_count != 0 || a->length > n - row || a->n_buffers < 3) {
            failed = "csv_cells: a null line, or more lines than said";
            goto done;
        }
        int oom = 0;
        Py_BEGIN_ALLOW_THREADS;
        for (int64_t i = 0; i < a->length && !oom; i++, row++) {
            const uint8_t *s;
            int64_t len;
            ok[row] = 0;
            if (!string_at(a, fmt, i, &s, &len))
                continue;
            const uint8_t *e = s + len, *p = s;
            Py_ssize_t k = 0;
            for (;;) { /* the line's cells, up to one more than its fields */
                const uint8_t *c = cell_end(p, e, &first[k], &hash[k]);
                cut[k] = p;
                cut_len[k++] = c - p;
                if (c == e || k > fields)
                    break;
                p = c + 1;
            }
            if (k != fields) /* fewer cells, or more (a comma after the last field's) */
                continue;
            int wide = any_raw && non_ascii(s, len); /* (offsets in characters then, not bytes) */
            for (k = 0; k < fields; k++) {
                if (any_raw && raw[k]) {
                    codes[k * n + row] = wide ? chars_in(s, cut[k] - s) : (uint32_t)(cut[k] - s);
                    lens[k * n + row] = wide ? chars_in(cut[k], cut_len[k]) : (uint32_t)cut_len[k];
                    continue;
                }
                int64_t code = cell_code(&tables[k], cut[k], cut_len[k], first[k], hash[k]);
                if (code < 0) {
                    oom = 1;
                    break;
                }
                codes[k * n + row] = (uint32_t)code;
            }
            ok[row] = 1;
        }
        Py_END_ALLOW_THREADS;
        if (oom) {
            failed = "";
            goto done;
        }
    }
    if (row != n) {
        failed = "csv_cells: fewer lines than said";
        goto done;
    }
    for (int64_t i = 0; i < n; i++)
        if (!ok[i])
            for (Py_ssize_t k = 0; k < fields; k++) {
                codes[k * n + i] = 0;
                if (any_raw && raw[k])
                    lens[k * n + i] = 0;
            }
    result = PyList_New(fields);
    if (result == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < fields; k++) {
        PyObject *col = PyList_New(tables[k].n_uniq);
        if (col == NULL) {
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(result, k, col);
        for (int64_t j = 0; j < tables[k].n_uniq; j++) {
            const cell_ref *r = &tables[k].uniq[j];
            PyObject *u = PyUnicode_DecodeUTF8((const char *)r->s, r->len, "strict");
            if (u == NULL) {
                Py_CLEAR(result);
                goto done;
            }
            PyList_SET_ITEM(col, j, u);
        }
    }
done:
    if (failed != NULL && !PyErr_Occurred()) {
        if (*failed)
            PyErr_SetString(PyExc_ValueError, failed);
        else
            PyErr_NoMemory();
    }
    if (tables != NULL)
        for (Py_ssize_t k = 0; k < fields; k++) {
            free(tables[k].slot);
            free(tables[k].uniq);
        }
    free(tables);
    free(cut);
    free(cut_len);
    free(hash);
    free(first);
    for (int64_t c = 0; c < n_chunks; c++)
        chunks[c].release(&chunks[c]);
    free(chunks);
    stream->release(stream);
    PyBuffer_Release(&codes_b);
    PyBuffer_Release(&ok_b);
    if (any_raw)
        PyBuffer_Release(&lens_b);
    return result;
}

/* ---- json_objects: numbers read from decimals, written as polars' `struct.json_encode` writes them */

/* The shortest decimal of the double nearest to m / 10^k (`DIGITS`) as `struct.json_encode` writes it
 * (Ryu's shortest digits; plain notation for 1e-5 <= v < 1e16, `.0` after an integer), at out; its length,
 * or 0 where that is not certain here: more than 15 significant digits (a decimal of 15 or fewer is the
 * shortest one of its double: two such decimals never round to the same double), or outside plain notation. */
static int json_number(int64_t packed, char *out) {
    if (packed < 0)
        return 0;
    uint64_t m = (uint64_t)packed >> 5;
    int k = (int)(packed & 31);
    if (m == 0) {
        memcpy(out, "0.0", 3);
        return 3;
    }
    int e = -k; /* the value: m * 10^e, m without trailing zeros */
    while (m % 10 == 0) {
        m /= 10;
        e++;
    }
    if (m >= UINT64_C(1000000000000000))
        return 0;
    static const char PAIRS[201] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                   "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                   "8081828384858687888990919293949596979899";
    char digits[16]; /* m's digits, right-aligned in digits[16 - len:] */
    int at = 16;
    while (m >= 100) {
        at -= 2;
        memcpy(digits + at, PAIRS + 2 * (m % 100), 2);
        m /= 100;
    }
    if (m >= 10) {
        at -= 2;
        memcpy(digits + at, PAIRS + 2 * m, 2);
    } else {
        digits[--at] = (char)('0' + m);
    }
    int len = 16 - at;
    int point = len + e; /* digits before the point (<= 0: zeros after it first) */
    if (point <= -5 || point > 16)
        return 0;
    int w = 0;
    if (point <= 0) {
        out[w++] = '0';
        out[w++] = '.';
        for (int z = 0; z < -point; z++)
            out[w++] = '0';
        memcpy(out + w, digits + at, (size_t)len);
        w += len;
    } else if (e >= 0) {
        memcpy(out, digits + at, (size_t)len);
        w = len;
        for (int z = 0; z < e; z++)
            out[w++] = '0';
        out[w++] = '.';
        out[w++] = '0';
    } else {
        memcpy(out, digits + at, (size_t)point);
        w = point;
        out[w++] = '.';
        memcpy(out + w, digits + at + point, (size_t)(len - point));
        w += len - point;
    }
    return w;
}

PyDoc_STRVAR(json_objects_doc,
             "json_objects(names, digits, n) -> (schema, array) | None\n\n"
             "The JSON objects {names[0]: v0, ...} of n rows as the Arrow C capsules of a string-view array\n"
             "(`__arrow_c_array__`'s pair, for `pl.Series`), where row i's value j is the\n"
             "number whose digits are digits[j*n + i] (a buffer of int64, `DIGITS` as `titan` writes them),\n"
             "written as polars' `struct.json_encode` writes the Float64 nearest to it; None where a value is\n"
             "absent (-1) or one this does not write (see json_number). `names`: a list of bytes, plain keys.");

static PyObject *json_objects(PyObject *self, PyObject *args) {
    PyObject *names_o, *digits_o;
    Py_ssize_t n;
    (void)self;
    if (!PyArg_ParseTuple(args, "O!On", &PyList_Type, &names_o, &digits_o, &n))
        return NULL;
    Py_ssize_t k = PyList_GET_SIZE(names_o), keys = 0;
    if (k < 1 || k > MAX_FIELDS || n < 0) {
        PyErr_SetString(PyExc_ValueError, "json_objects: 1 to 64 names");
        return NULL;
    }
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *b = PyList_GET_ITEM(names_o, j);
        if (!PyBytes_Check(b)) {
            PyErr_SetString(PyExc_TypeError, "json_objects: names must be bytes");
            return NULL;
        }
        keys += PyBytes_GET_SIZE(b);
    }
    Py_buffer db;
    if (PyObject_GetBuffer(digits_o, &db, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (db.len < (Py_ssize_t)(k * n * sizeof(int64_t))) {
        PyBuffer_Release(&db);
        PyErr_SetString(PyExc_ValueError, "json_objects: digits buffer too short");
        return NULL;
    }
    /* a row: braces, a quoted key, colon and comma each, numbers of at most 24 characters */
    size_t row = 2 + (size_t)keys + (size_t)k * (4 + 24);
    if (row * (size_t)n >= INT32_MAX) {
        PyBuffer_Release(&db);
        Py_RETURN_NONE; /* (offsets of a view are 32-bit) */
    }
    uint8_t *buf = malloc(row * (size_t)(n ? n : 1)), *views = malloc(16 * (size_t)(n ? n : 1));
    char *prefix = malloc((size_t)(keys + 4 * k));
    if (buf == NULL || views == NULL || prefix == NULL) {
        free(buf), free(views), free(prefix);
        PyBuffer_Release(&db);
        return PyErr_NoMemory();
    }
    const int64_t *digits = (const int64_t *)db.buf;
    /* each value's prefix: `{"name":` for the first, `,"name":` after */
    size_t pre_at[MAX_FIELDS], pre_len[MAX_FIELDS], p = 0;
    for (Py_ssize_t j = 0; j < k; j++) {
        PyObject *b = PyList_GET_ITEM(names_o, j);
        pre_at[j] = p;
        prefix[p++] = j ? ',' : '{';
        prefix[p++] = '"';
        memcpy(prefix + p, PyBytes_AS_STRING(b), (size_t)PyBytes_GET_SIZE(b));
        p += (size_t)PyBytes_GET_SIZE(b);
        prefix[p++] = '"';
        prefix[p++] = ':';
        pre_len[j] = p - pre_at[j];
    }
    size_t w = 0;
    int ok = 1;
    for (Py_ssize_t i = 0; i < n && ok; i++) {
        size_t start = w;
        for (Py_ssize_t j = 0; j < k; j++) {
            memcpy(buf + w, prefix + pre_at[j], pre_len[j]);
            w += pre_len[j];
            int len = json_number(digits[j * n + i], (char *)buf + w);
            if (len == 0) {
                ok = 0;
                break;
            }
            w += (size_t)len;
        }
        buf[w++] = '}';
        put_view(views, i, buf, (int64_t)start, (int64_t)(w - start));
    }
    free(prefix);
    PyBuffer_Release(&db);
    if (!ok) {
        free(buf), free(views);
        Py_RETURN_NONE;
    }
    uint8_t *fit = realloc(buf, w ? w : 1); /* (the rows' bound was twice their usual size; views hold offsets) */
    return view_capsules(fit ? fit : buf, (int64_t)w, views, n);
}

/* ---- lines: a file's bytes cut into lines, as `parsers.base.lines_from_bytes` cuts valid UTF-8 */

/* Whether s[0:len] is UTF-8 as Python's strict decoder takes it (Unicode 15, table 3-7: no overlong form, no
 * surrogate, nothing above U+10FFFF) */
static int valid_utf8(const uint8_t *s, int64_t len) {
    int64_t i = 0;
    while (i < len) {
        if (len - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if ((w & HIGHS) == 0) {
                i += 8;
                continue;
            }
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int more;
        uint8_t lo = 0x80, hi = 0xBF; /* the range of the byte after the first */
        if (c >= 0xC2 && c <= 0xDF) {
            more = 1;
        } else if (c >= 0xE0 && c <= 0xEF) {
            more = 2;
            if (c == 0xE0)
                lo = 0xA0;
            else if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            more = 3;
            if (c == 0xF0)
                lo = 0x90;
            else if (c == 0xF4)
                hi = 0x8F;
        } else {
            return 0;
        }
        if (len - i <= more || s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (int j = 2; j <= more; j++)
            if ((s[i + j] & 0xC0) != 0x80)
                return 0;
        i += more + 1;
    }
    return 1;
}

PyDoc_STRVAR(lines_doc,
             "lines(data) -> (schema, array) | None\n\n"
             "The lines of a file's bytes (a buffer) as the Arrow C capsules of a string-view array over a copy\n"
             "the module owns: cut at `\\n`, one `\\r` before it dropped, no line after a final `\\n` (and\n"
             "none of `\\n` alone), as `parsers.base.lines_from_bytes` cuts them. None where the bytes are not\n"
             "valid UTF-8 or hold `\\r` but no `\\n` (that function decides then), or 2 GiB or more.");

/* Room in *at (of *cap) for `need` positions, grown where short; 0 when it cannot grow */
static int room_for(int32_t **at, int64_t *cap, int64_t need) {
    if (need <= *cap)
        return 1;
    int64_t want = *cap * 2 + 16;
    int32_t *grown = realloc(*at, (size_t)want * sizeof(int32_t));
    if (grown == NULL)
        return 0;
    *at = grown, *cap = want;
    return 1;
}

/* The positions of the '\n's of s[0:len] appended to *at (growing it, *cap its room; *n its count), and
 * whether every byte is ASCII; 0 when the room cannot grow. One pass, 16 bytes at a time where SSE2 is there
 * (x86-64 always): a 1.2 MB log's lines were four passes (the UTF-8 check, a memchr a line to count them,
 * the copy, a memchr a line again), ~400 us in a worker, now this one, the copy and the views. */
static int newlines(const uint8_t *s, int64_t len, int32_t **at, int64_t *cap, int64_t *n, int *ascii) {
    int64_t i = 0, k = *n;
    uint8_t high = 0;
#if defined(__SSE2__)
    const __m128i nl = _mm_set1_epi8('\n');
    __m128i ors = _mm_setzero_si128();
    for (; i + 16 <= len; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + i));
        ors = _mm_or_si128(ors, v);
        unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, nl));
        if (m == 0)
            continue;
        if (!room_for(at, cap, k + 16))
            return 0;
        do {
            (*at)[k++] = (int32_t)(i + __builtin_ctz(m));
            m &= m - 1;
        } while (m);
    }
    high = _mm_movemask_epi8(ors) != 0;
#endif
    for (; i < len; i++) {
        high |= s[i] >> 7;
        if (s[i] != '\n')
            continue;
        if (!room_for(at, cap, k + 1))
            return 0;
        (*at)[k++] = (int32_t)i;
    }
    *n = k;
    *ascii = !high;
    return 1;
}

static PyObject *lines(PyObject *self, PyObject *args) {
    PyObject *data_o;
    (void)self;
    if (!PyArg_ParseTuple(args, "O", &data_o))
        return NULL;
    Py_buffer db;
    if (PyObject_GetBuffer(data_o, &db, PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    const uint8_t *s = db.buf;
    int64_t len = db.len;
    if (len >= INT32_MAX) {
        PyBuffer_Release(&db);
        Py_RETURN_NONE;
    }
    int64_t cap = len / 64 + 16, n_nl = 0;
    int32_t *at = malloc((size_t)cap * sizeof(int32_t));
    int ok = at != NULL, ascii = 1;
    Py_BEGIN_ALLOW_THREADS;
    if (ok)
        ok = newlines(s, len, &at, &cap, &n_nl, &ascii);
    Py_END_ALLOW_THREADS;
    if (!ok) {
        free(at);
        PyBuffer_Release(&db);
        return PyErr_NoMemory();
    }
    int lf = n_nl > 0;
    if ((!lf && len > 0 && memchr(s, '\r', (size_t)len) != NULL)) {
        free(at);
        PyBuffer_Release(&db);
        Py_RETURN_NONE;
    }
    if (!ascii) {
        Py_BEGIN_ALLOW_THREADS;
        ok = valid_utf8(s, len);
        Py_END_ALLOW_THREADS;
        if (!ok) {
            free(at);
            PyBuffer_Release(&db);
            Py_RETURN_NONE;
        }
    }
    int64_t end = len;
    if (end > 0 && s[end - 1] == '\n')
        end--, n_nl--; /* (a final line end makes no line) */
    int64_t n = len > 0 && !(len == 1 && s[0] == '\n') ? n_nl + 1 : 0;
    uint8_t *copy = malloc(len > 0 ? (size_t)len : 1), *views = malloc(16 * (size_t)(n ? n : 1));
    if (copy == NULL || views == NULL) {
        free(copy), free(views), free(at);
        PyBuffer_Release(&db);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS;
    memcpy(copy, s, (size_t)len);
    int64_t start = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t stop = i < n_nl ? at[i] : end, cut = stop;
        if (cut > start && copy[cut - 1] == '\r')
            cut--;
        put_view(views, i, copy, start, cut - start);
        start = stop + 1;
    }
    Py_END_ALLOW_THREADS;
    free(at);
    PyBuffer_Release(&db);
    return view_capsules(copy, len, views, n);
}

/* ---- coll_groups: NCCL COLL lines grouped by what surrounds their opCount and buffers */

static const uint8_t HEX[256] = {
    ['0'] = 1, ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1, ['7'] = 1, ['8'] = 1, ['9'] = 1,
    ['a'] = 1, ['b'] = 1, ['c'] = 1, ['d'] = 1, ['e'] = 1, ['f'] = 1,
    ['A'] = 1, ['B'] = 1, ['C'] = 1, ['D'] = 1, ['E'] = 1, ['F'] = 1,
};

INLINE int is_hex(uint8_t c) { return HEX[c]; }

/* p past `0x<hex>` or `(nil)` at p (NULL: neither) */
INLINE const uint8_t *coll_buffer(const uint8_t *p, const uint8_t *e) {
    if (e - p >= 5 && memcmp(p, "(nil)", 5) == 0)
        return p + 5;
    if (e - p < 3 || p[0] != '0' || p[1] != 'x' || !is_hex(p[2]))
        return NULL;
    p += 3;
    while (p < e && is_hex(*p))
        p++;
    return p;
}

/* Whether [p, e) is all of `_COLL_MID`: `<hex> sendbuff <buffer> recvbuff <buffer>` */
static int coll_mid(const uint8_t *p, const uint8_t *e) {
    if (p >= e || !is_hex(*p))
        return 0;
    while (p < e && is_hex(*p))
        p++;
    if (e - p < 10 || memcmp(p, " sendbuff ", 10) != 0)
        return 0;
    p = coll_buffer(p + 10, e);
    if (p == NULL || e - p < 10 || memcmp(p, " recvbuff ", 10) != 0)
        return 0;
    p = coll_buffer(p + 10, e);
    return p == e;
}

typedef struct {
    uint8_t *key;      /* the head (o bytes) then the tail (t bytes), copied */
    int64_t o, t, d;   /* the head's length, the tail's, the first line's ` count ` offset */
    uint64_t hash;
    int ok;
    int64_t calls, first, last;
} coll_group;

/* A hash of n bytes at p after h: two multiply chains over alternate words (half the latency of one), the
 * last word's bytes below n */
INLINE uint64_t coll_hash(const uint8_t *p, int64_t n, uint64_t h) {
    uint64_t h2 = h ^ (uint64_t)n;
    for (; n >= 16; p += 16, n -= 16) {
        uint64_t w, w2;
        memcpy(&w, p, 8);
        memcpy(&w2, p + 8, 8);
        h = (h ^ w) * HASH_K;
        h2 = (h2 ^ w2) * HASH_K;
    }
    uint8_t last[16] = {0};
    memcpy(last, p, (size_t)n);
    uint64_t w, w2;
    memcpy(&w, last, 8);
    memcpy(&w2, last + 8, 8);
    h = (h ^ w) * HASH_K;
    h2 = (h2 ^ w2) * HASH_K;
    return (h ^ (h2 >> 29) ^ (h2 << 35)) * HASH_K;
}

PyDoc_STRVAR(coll_groups_doc,
             "coll_groups(stream, n, codes) -> (int, list) | None\n\n"
             "Group the n strings of an Arrow stream that hold `: opCount ` and, 10 or more bytes after its\n"
             "start, their first ` count `, by the bytes before the first (head and op), those after the\n"
             "second (tail) and whether the bytes between are `_COLL_MID` (opCount, buffers). Writes each\n"
             "line's group number to codes[i] (a writable int32 buffer of n; -1: in no group). Returns how many\n"
             "lines hold `: opCount ` and the groups in order of appearance, each (o, d, ok, calls, first,\n"
             "last): its first line's offsets of `: opCount ` and ` count `, 1 where the middle is\n"
             "`_COLL_MID`, its lines, the positions of its first and last line. None where the stream holds a\n"
             "null or more than n strings (`nccl._coll_groups` groups them with polars then).");

static PyObject *coll_groups(PyObject *self, PyObject *args) {
    PyObject *capsule, *codes_o;
    Py_ssize_t n;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnO", &capsule, &n, &codes_o))
        return NULL;
    Py_buffer cb;
    if (PyObject_GetBuffer(codes_o, &cb, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0)
        return NULL;
    if (n < 0 || n > INT32_MAX || cb.len < n * (Py_ssize_t)sizeof(int32_t)) {
        PyBuffer_Release(&cb);
        PyErr_SetString(PyExc_ValueError, "coll_groups: codes must hold n int32, n < 2^31");
        return NULL;
    }
    int fmt;
    struct ArrowArrayStream *stream = open_stream(capsule, &fmt);
    if (stream == NULL) {
        PyBuffer_Release(&cb);
        return NULL;
    }
    int32_t *codes = (int32_t *)cb.buf;
    coll_group *g = NULL;
    int64_t ng = 0, capg = 0, n_oc = 0, done = 0;
    uint32_t *slot = calloc(1024, sizeof(uint32_t)); /* group + 1, 0: empty */
    uint64_t mask = 1023;
    int stop = slot == NULL, bad = 0, nomem = slot == NULL;
    while (!stop) {
        struct ArrowArray a;
        if (stream->get_next(stream, &a) != 0) {
            bad = 1;
            break;
        }
        if (a.release == NULL)
            break;
        if (a.null_count != 0 || a.length > n - done || a.n_buffers < 3) {
            stop = 1;
        } else {
            Py_BEGIN_ALLOW_THREADS;
            for (int64_t i = 0; i < a.length; i++, done++) {
                const uint8_t *s;
                int64_t len;
                if (!string_at(&a, fmt, i, &s, &len)) {
                    stop = 1;
                    break;
                }
                codes[done] = -1;
                const uint8_t *e = s + len, *oc = find_bytes(s, e, ": opCount ", 10);
                if (oc == NULL)
                    continue;
                n_oc++;
                const uint8_t *ct = find_bytes(s, e, " count ", 7);
                if (ct == NULL || ct - oc < 10)
                    continue;
                int64_t o = oc - s, d = ct - s, t = len - d - 1;
                int ok = coll_mid(oc + 10, ct);
                uint64_t h = coll_hash(ct + 1, t, coll_hash(s, o, (uint64_t)ok + 1));
                uint64_t k = slot_of(h, mask);
                int64_t at = -1;
                for (; slot[k]; k = (k + 1) & mask) {
                    coll_group *c = &g[slot[k] - 1];
                    if (c->hash == h && c->o == o && c->t == t && c->ok == ok && memcmp(c->key, s, (size_t)o) == 0 &&
                        memcmp(c->key + o, ct + 1, (size_t)t) == 0) {
                        at = slot[k] - 1;
                        break;
                    }
                }
                if (at < 0) {
                    if (ng == capg) {
                        capg = capg ? capg * 2 : 64;
                        coll_group *more = realloc(g, (size_t)capg * sizeof(coll_group));
                        if (more == NULL) {
                            nomem = stop = 1;
                            break;
                        }
                        g = more;
                    }
                    uint8_t *key = malloc((size_t)(o + t > 0 ? o + t : 1));
                    if (key == NULL) {
                        nomem = stop = 1;
                        break;
                    }
                    memcpy(key, s, (size_t)o);
                    memcpy(key + o, ct + 1, (size_t)t);
                    g[ng] = (coll_group){key, o, t, d, h, ok, 0, done, done};
                    at = ng++;
                    slot[k] = (uint32_t)at + 1;
                    if ((uint64_t)ng * 2 > mask) { /* grow: every group placed again */
                        uint32_t *s2 = reslot(&g[0].hash, sizeof(coll_group), ng, (mask + 1) * 2);
                        if (s2 == NULL) {
                            nomem = stop = 1;
                            break;
                        }
                        free(slot);
                        slot = s2, mask = mask * 2 + 1;
                    }
                }
                g[at].calls++;
                g[at].last = done;
                codes[done] = (int32_t)at;
            }
            Py_END_ALLOW_THREADS;
        }
        a.release(&a);
    }
    stream->release(stream);
    PyBuffer_Release(&cb);
    PyObject *result = NULL;
    if (nomem)
        PyErr_NoMemory();
    else if (bad)
        PyErr_SetString(PyExc_ValueError, "the Arrow stream failed");
    else if (stop || done != n)
        result = Py_NewRef(Py_None);
    else {
        PyObject *list = PyList_New(ng);
        for (int64_t j = 0; list != NULL && j < ng; j++) {
            PyObject *t = Py_BuildValue("(LLiLLL)", (long long)g[j].o, (long long)g[j].d, g[j].ok,
                                        (long long)g[j].calls, (long long)g[j].first, (long long)g[j].last);
            if (t == NULL)
                Py_CLEAR(list);
            else
                PyList_SET_ITEM(list, j, t);
        }
        if (list != NULL)
            result = Py_BuildValue("(LN)", (long long)n_oc, list);
    }
    for (int64_t j = 0; j < ng; j++)
        free(g[j].key);
    free(g);
    free(slot);
    return result;
}

/* ---- ds_timers: DeepSpeed `log_dist` timer lines, numbered by the text they hold besides their numbers */

#define DS_SHAPES 256 /* the most distinct shapes `ds_timers` numbers (more: the caller's regex decides) */
#define DS_SHAPE_BYTES 1024 /* the longest shape it keeps */

/* `[0-9]+` (any length), skipped */
INLINE int some_digits(cursor *c) {
    const uint8_t *s = c->p;
    while (c->p < c->e && IS_DIGIT(*c->p))
        c->p++;
    return c->p > s;
}

/* A line of `parsers.step_log._DS_TIMER_LINE`:
 *   ^\[YYYY-MM-DD HH:MM:SS,mmm\] \[INFO\] \[logging\.py:N:log_dist\] \[Rank N\] time \(ms\) \| NAME: D
 *   (?: \| NAME: D)*$          (NAME `[a-z_]+`, D `[0-9]+(?:\.[0-9]+)?`, every digit `[0-9]`)
 * 1 where it is one, its shape written to `shape` (at most DS_SHAPE_BYTES, *len its length): the part after
 * `time (ms) | ` with each run of digits as one `0`; else 0 (-1: of the form, a shape too long to keep).
 * Each run of digits before that part is one `0` of the same text for every such line, so the shape and
 * that text hold every character of the line that is not a digit, in order, a digit run apart. */
static int ds_timer_line(const uint8_t *p, const uint8_t *e, uint8_t *shape, int64_t *len) {
    cursor c = {p, e, 0, 0};
    int v; /* (the stamp's digits only: any date the regex takes) */
    if (!LIT(&c, "[") || !fixed(&c, 4, &v) || !LIT(&c, "-") || !fixed(&c, 2, &v) || !LIT(&c, "-") ||
        !fixed(&c, 2, &v) || !LIT(&c, " ") || !fixed(&c, 2, &v) || !LIT(&c, ":") || !fixed(&c, 2, &v) ||
        !LIT(&c, ":") || !fixed(&c, 2, &v) || !LIT(&c, ",") || !fixed(&c, 3, &v))
        return 0;
    if (!LIT(&c, "] [INFO] [logging.py:") || !some_digits(&c) || !LIT(&c, ":log_dist] [Rank ") ||
        !some_digits(&c) || !LIT(&c, "] time (ms) | "))
        return 0;
    int64_t n = 0;
    int room = 1;
    for (;;) {
        const uint8_t *name = c.p;
        while (c.p < c.e && ((*c.p >= 'a' && *c.p <= 'z') || *c.p == '_'))
            c.p++;
        int64_t nl = c.p - name;
        if (nl == 0 || !LIT(&c, ": ") || !some_digits(&c))
            return 0;
        int frac = 0;
        if (c.p < c.e && *c.p == '.') {
            c.p++;
            if (!some_digits(&c))
                return 0;
            frac = 1;
        }
        int last = c.p == c.e;
        if (!last && !LIT(&c, " | "))
            return 0;
        /* NAME `: 0`, `.0` after a fraction, ` | ` before the next */
        int64_t add = nl + 3 + 2 * frac + (last ? 0 : 3);
        if (room && n + add <= DS_SHAPE_BYTES) {
            memcpy(shape + n, name, (size_t)nl);
            memcpy(shape + n + nl, frac ? ": 0.0 | " : ": 0 | ", (size_t)(add - nl));
            n += add;
        } else {
            room = 0;
        }
        if (last)
            break;
    }
    *len = n;
    return room ? 1 : -1;
}

typedef struct {
    uint8_t bytes[DS_SHAPE_BYTES];
    int64_t len;
    uint64_t hash;
} ds_shape;

typedef struct {
    ds_shape *shapes; /* DS_SHAPES of them, in order of appearance */
    int64_t n;
    uint32_t slot[4 * DS_SHAPES]; /* shape + 1, 0: empty (a quarter full at most) */
    uint32_t last;                 /* the shape + 1 of the last line of the form (0: none yet) */
} ds_table;

/* `scan_stream`'s scanner of `ds_timers` (ctx its `ds_table`): i64[0] 0 where the line is not a timer line,
 * else its shape + 1; 0 (stop) at a shape too long or one more than the table holds */
static int ds_timer_scan(const uint8_t *p, const uint8_t *e, const void *ctx, int64_t *i64, double *f64) {
    ds_table *t = (ds_table *)ctx;
    uint8_t shape[DS_SHAPE_BYTES];
    int64_t sl;
    (void)f64;
    int got = ds_timer_line(p, e, shape, &sl);
    if (got <= 0) {
        i64[0] = 0;
        return got == 0;
    }
    ds_shape *last = t->last ? &t->shapes[t->last - 1] : NULL;
    if (last && last->len == sl && memcmp(last->bytes, shape, (size_t)sl) == 0) {
        i64[0] = t->last; /* (the shape of the line before: a rank's lines mostly share one) */
        return 1;
    }
    uint64_t h = HASH_K;
    for (int64_t j = 0; j < sl; j++)
        h = (h ^ shape[j]) * HASH_K;
    const uint64_t mask = 4 * DS_SHAPES - 1;
    uint64_t k = slot_of(h, mask);
    for (; t->slot[k]; k = (k + 1) & mask) {
        ds_shape *c = &t->shapes[t->slot[k] - 1];
        if (c->hash == h && c->len == sl && memcmp(c->bytes, shape, (size_t)sl) == 0)
            break;
    }
    if (!t->slot[k]) {
        if (t->n == DS_SHAPES)
            return 0;
        ds_shape *c = &t->shapes[t->n];
        memcpy(c->bytes, shape, (size_t)sl);
        c->len = sl;
        c->hash = h;
        t->slot[k] = (uint32_t)++t->n;
    }
    i64[0] = t->last = t->slot[k];
    return 1;
}

/* One line of `dmesg --time-format iso`, with or without `--decode`'s `fac :lvl : ` (`parsers.kernel_log` style
 * `dmesg_iso`: its regex, `_fast_iso`'s split and `_iso_fast_then_full`'s value):
 *   ([a-z]+ *: *[a-z]+ *: )?YYYY-MM-DDTHH:MM:SS,ffffff(Z|[+-]HH:?MM)( msg)?
 * the message after the first blank, less a printk caller id `[T123]`/`[C1]` (blanks after `[`) and one
 * blank after it. i64: the line's class (0: the style's regex does not match it; 1: it does, and the stamp
 * is of the plain shape `_ISO_SHAPE` and exists; 2: not decided here, the regex path reads it), then for
 * class 1 the stamp in microseconds since the epoch (UTC) and the byte offset of the message. Where the
 * regex's `\s` or `\d` could take a byte this reads otherwise (a tab, a non-ASCII byte), the class is 2. */
INLINE int ascii_space(uint8_t c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* `dmesg --decode`'s `[a-z]+\s*:\s*[a-z]+\s*: ` at a letter, the blanks spaces only: 1 (the cursor past it),
 * or 0 (not read here: the regex decides) */
INLINE int decode_prefix(cursor *c) {
    const uint8_t *e = c->e;
    while (c->p < e && *c->p >= 'a' && *c->p <= 'z')
        c->p++;
    while (c->p < e && *c->p == ' ')
        c->p++;
    if (!LIT(c, ":"))
        return 0;
    while (c->p < e && *c->p == ' ')
        c->p++;
    if (c->p >= e || *c->p < 'a' || *c->p > 'z')
        return 0;
    while (c->p < e && *c->p >= 'a' && *c->p <= 'z')
        c->p++;
    while (c->p < e && *c->p == ' ')
        c->p++;
    return LIT(c, ": ");
}

/* At a message: a printk caller id `^\[\s*[TC]\d+\]\s?` removed as the kernel parser's splits remove it (the
 * cursor past it and one blank after it, or where it was if there is none): 1, or 0 where a tab or a
 * non-ASCII byte could be the regex's `\s` or `\d` (not decided here) */
INLINE int caller_id(cursor *c) {
    const uint8_t *e = c->e;
    if (c->p >= e || *c->p != '[')
        return 1;
    const uint8_t *q = c->p + 1;
    while (q < e && *q == ' ')
        q++;
    if (q < e && (*q >= 0x80 || ascii_space(*q)))
        return 0;
    if (q < e && (*q == 'T' || *q == 'C')) {
        const uint8_t *digits = ++q;
        while (q < e && IS_DIGIT(*q))
            q++;
        if (q < e && *q >= 0x80)
            return 0;
        if (q > digits && q < e && *q == ']') {
            q++;
            if (q < e && *q >= 0x80)
                return 0;
            if (q < e && ascii_space(*q))
                q++;
            c->p = q;
        }
    }
    return 1;
}

static int dmesg_iso_line(const uint8_t *p, const uint8_t *e, const void *ctx, int64_t *i64, double *f64) {
    (void)ctx;
    (void)f64;
    i64[0] = 2;
    i64[1] = 0;
    i64[2] = 0;
    if (p >= e) {
        i64[0] = 0; /* the regex needs a letter or a digit first */
        return 1;
    }
    uint8_t c0 = *p;
    int letter = c0 >= 'a' && c0 <= 'z';
    if (!letter && !IS_DIGIT(c0)) {
        if (c0 < 0x80)
            i64[0] = 0; /* (a non-ASCII byte may start a Unicode digit) */
        return 1;
    }
    cursor c = {p, e, 0, 0};
    if (letter && !decode_prefix(&c))
        return 1;
    int y, mo, d, h, mi, s, f, oh = 0, om = 0, sign = 1;
    if (!fixed(&c, 4, &y) || !LIT(&c, "-") || !fixed(&c, 2, &mo) || !LIT(&c, "-") || !fixed(&c, 2, &d) ||
        !LIT(&c, "T") || !fixed(&c, 2, &h) || !LIT(&c, ":") || !fixed(&c, 2, &mi) || !LIT(&c, ":") ||
        !fixed(&c, 2, &s) || !LIT(&c, ",") || !fixed(&c, 6, &f))
        return 1;
    if (c.p < e && *c.p >= 0x80)
        return 1;
    if (LIT(&c, "Z")) {
    } else if (c.p < e && (*c.p == '+' || *c.p == '-')) {
        sign = *c.p == '-' ? -1 : 1;
        c.p++;
        if (!fixed(&c, 2, &oh))
            return 1;
        LIT(&c, ":");
        if (!fixed(&c, 2, &om))
            return 1;
    } else
        return 1; /* (more fraction digits, or another offset: not the plain shape) */
    if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || s > 59 ||
        oh > 23 || om > 59)
        return 1;
    /* `_fast_iso` takes the stamp up to the first blank: it must end there, or the line */
    if (c.p < e && *c.p != ' ')
        return 1;
    if (c.p < e)
        c.p++;
    if (!caller_id(&c))
        return 1;
    int64_t days = days_from_civil(y, (unsigned)mo, (unsigned)d);
    int64_t secs = days * 86400 + h * 3600 + mi * 60 + s - sign * (oh * 3600 + om * 60);
    i64[0] = 1;
    i64[1] = secs * 1000000 + f;
    i64[2] = c.p - p;
    return 1;
}

PyDoc_STRVAR(dmesg_iso_doc,
             "dmesg_iso(stream, n, i64, f64) -> int\n\n"
             "Read the n strings of an Arrow stream as `dmesg --time-format iso` lines: i64[i] the class of\n"
             "line i (0: not of the style, 1: of it, 2: not decided here), for class 1 i64[n + i] its stamp\n"
             "(us since the epoch, UTC) and i64[2n + i] the byte offset of its message (f64: unused).\n"
             "Returns n, or less where a line is null.");

static PyObject *dmesg_iso(PyObject *self, PyObject *args) {
    (void)self;
    return scan_args(args, dmesg_iso_line, 3, 0, "dmesg_iso");
}

/* One line of plain `dmesg` (`parsers.kernel_log` style `dmesg_raw`: its regex, `_fast_monotonic`'s split and
 * the Float64 cast of the uptime), with or without `--decode`'s prefix and a `<prio>`:
 *   ([a-z]+ *: *[a-z]+ *: )?(<D{1,3}>)?\[ *D+\.D+\]( ?msg)?
 * the message after the `]` less one blank and a printk caller id (`caller_id`). i64: the class as
 * `dmesg_iso_line`'s (1: the uptime exact as a double, `decimal`), the byte offset of the message; f64: the
 * uptime in seconds. */
static int dmesg_raw_line(const uint8_t *p, const uint8_t *e, const void *ctx, int64_t *i64, double *f64) {
    (void)ctx;
    i64[0] = 2;
    i64[1] = 0;
    f64[0] = 0;
    /* (every line the regex matches opens with a letter, `<` or `[`: ASCII bytes) */
    int letter = p < e && *p >= 'a' && *p <= 'z';
    if (p >= e || (!letter && *p != '<' && *p != '[')) {
        i64[0] = 0;
        return 1;
    }
    cursor c = {p, e, 0, 0};
    if (letter && !decode_prefix(&c))
        return 1;
    if (LIT(&c, "<")) {
        const uint8_t *d = c.p;
        while (c.p < e && IS_DIGIT(*c.p))
            c.p++;
        if (c.p == d || c.p - d > 3 || !LIT(&c, ">"))
            return 1;
    }
    if (!LIT(&c, "["))
        return 1;
    while (c.p < e && *c.p == ' ')
        c.p++;
    double up;
    const uint8_t *num = c.p;
    if (!decimal(&c, 0, &up) || c.k == 0 || c.p == num)
        return 1;
    if (!LIT(&c, "]"))
        return 1; /* (another digit, a ` <delta>`, a tab: the regex decides) */
    LIT(&c, " ");
    if (!caller_id(&c))
        return 1;
    i64[0] = 1;
    i64[1] = c.p - p;
    f64[0] = up;
    return 1;
}

PyDoc_STRVAR(dmesg_raw_doc,
             "dmesg_raw(stream, n, i64, f64) -> int\n\n"
             "Read the n strings of an Arrow stream as plain `dmesg` lines: i64[i] the class of line i (0: not\n"
             "of the style, 1: of it, 2: not decided here), for class 1 i64[n + i] the byte offset of its\n"
             "message and f64[i] its uptime (s). Returns n, or less where a line is null.");

static PyObject *dmesg_raw(PyObject *self, PyObject *args) {
    (void)self;
    return scan_args(args, dmesg_raw_line, 2, 1, "dmesg_raw");
}

PyDoc_STRVAR(ds_timers_doc,
             "ds_timers(stream, n, shapes) -> list[bytes] | None\n\n"
             "Read the n strings of an Arrow stream as DeepSpeed `log_dist` timer lines (`step_log.\n"
             "_DS_TIMER_LINE`): shapes[i] (a writable buffer of n int64) 0 where line i is not one, else k + 1\n"
             "for its shape k: the part after `time (ms) | ` with each run of digits as one `0`. Returns the\n"
             "shapes in order of appearance; None where a line is null, there are more than 256 shapes or\n"
             "one longer than 1024 bytes (the regex then decides).");

static PyObject *ds_timers(PyObject *self, PyObject *args) {
    PyObject *capsule, *shapes_o;
    Py_ssize_t n;
    (void)self;
    if (!PyArg_ParseTuple(args, "OnO", &capsule, &n, &shapes_o))
        return NULL;
    ds_table *t = calloc(1, sizeof(ds_table));
    ds_shape *shapes = malloc(DS_SHAPES * sizeof(ds_shape));
    if (t == NULL || shapes == NULL) {
        free(t);
        free(shapes);
        return PyErr_NoMemory();
    }
    t->shapes = shapes;
    /* (no float output: the shapes' buffer stands for it, of no length needed) */
    PyObject *done = scan_into(capsule, n, shapes_o, shapes_o, ds_timer_scan, t, 1, 0, "ds_timers");
    PyObject *result = NULL;
    if (done != NULL && PyLong_AsSsize_t(done) != n)
        result = Py_NewRef(Py_None);
    else if (done != NULL) {
        result = PyList_New(t->n);
        for (int64_t j = 0; result != NULL && j < t->n; j++) {
            PyObject *b = PyBytes_FromStringAndSize((const char *)shapes[j].bytes, shapes[j].len);
            if (b == NULL)
                Py_CLEAR(result);
            else
                PyList_SET_ITEM(result, j, b);
        }
    }
    Py_XDECREF(done);
    free(shapes);
    free(t);
    return result;
}

/* ---- contains: one literal in a file's head, for the sniffers (`parsers._sniff.has_bytes`) */

PyDoc_STRVAR(contains_doc,
             "contains(haystack, needle) -> bool\n\n"
             "`needle in haystack` for two bytes objects, by the C library's memmem where it has one: what\n"
             "every sniffer asks of a file's head, dozens of times a file, without a Python call's cost.");

static PyObject *contains(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 2 || !PyBytes_Check(args[0]) || !PyBytes_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "contains(haystack, needle): two bytes objects");
        return NULL;
    }
    const char *h = PyBytes_AS_STRING(args[0]), *n = PyBytes_AS_STRING(args[1]);
    Py_ssize_t hl = PyBytes_GET_SIZE(args[0]), nl = PyBytes_GET_SIZE(args[1]);
    int found;
    if (nl == 0)
        found = 1;
    else if (nl > hl)
        found = 0;
    else if (nl == 1)
        found = memchr(h, n[0], (size_t)hl) != NULL;
    else {
#ifdef _WIN32
        found = find_bytes((const uint8_t *)h, (const uint8_t *)h + hl, n, (size_t)nl) != NULL;
#else
        found = memmem(h, (size_t)hl, n, (size_t)nl) != NULL;
#endif
    }
    return PyBool_FromLong(found);
}

/* ---- dmon_rows: `nvidia-smi dmon` data rows, the fields of one header (`nvidia_smi_dmon._fixed_width`) */

#define DMON_EXTRA_BYTES 256 /* the most bytes of a row's `extra` tokens compared with the row before */

typedef struct {
    const char *kinds;  /* one a field: 'n' a number, 'd' the date, 't' the time of day, 'x' extra, 's' skipped */
    int nf;
    int64_t rows;       /* the rows read so far */
    uint8_t prev[DMON_EXTRA_BYTES], cur[DMON_EXTRA_BYTES];
    int prev_len;
} dmon_layout;

/* One dmon data row: printable ASCII, tokens separated by spaces (leading and trailing ones too: the stripped
 * row the row regex reads), exactly one a field. A number is 1-8 digits (its value, as the Float64 cast gives
 * it) or `-` (N/A: NaN); the date `YYYYMMDD` and the time `HH:MM:SS` of a date that exists, a year of
 * 1970-2200, no leap second (i64[0]: the time in microseconds, as `_stamps` reads them; 0 without both);
 * i64[1]: 1 where the row's `extra` tokens differ from the row before's (or it is the first), else 0. Any
 * other row stops the scan: `_fixed_width`'s own reading then decides. */
#define SPACES UINT64_C(0x2020202020202020)

/* Whether every byte of [p, e) is printable ASCII (32-126), 8 bytes at a time */
INLINE int printable(const uint8_t *p, const uint8_t *e) {
    uint64_t bad = 0;
    for (; e - p >= 8; p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        /* a byte below 0x20, or above 0x7e (0x7f and up: its high bit, or set by adding 1) */
        bad |= ((w - ONES * 0x20) & ~w) | ((w + ONES) | w);
    }
    for (; p < e; p++)
        if (*p < 32 || *p > 126)
            return 0;
    return (bad & HIGHS) == 0;
}

/* The first byte of [p, e) that is not a space (e: none), 8 bytes at a time */
INLINE const uint8_t *past_spaces(const uint8_t *p, const uint8_t *e) {
    for (; e - p >= 8; p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= SPACES;
        if (w)
            return p + (__builtin_ctzll(w) >> 3);
    }
    while (p < e && *p == ' ')
        p++;
    return p;
}

/* The first space of [p, e) (e: none), 8 bytes at a time */
INLINE const uint8_t *to_space(const uint8_t *p, const uint8_t *e) {
    for (; e - p >= 8; p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= SPACES;
        uint64_t z = (w - ONES) & ~w & HIGHS; /* (its lowest bit marks the first zero byte: a space) */
        if (z)
            return p + (__builtin_ctzll(z) >> 3);
    }
    while (p < e && *p != ' ')
        p++;
    return p;
}

static int dmon_row(const uint8_t *p, const uint8_t *e, const void *ctx, int64_t *i64, double *f64) {
    dmon_layout *L = (dmon_layout *)ctx; /* (the scan's own state: read and written row after row, in order) */
    int t = 0, k = 0, cur_len = 0;
    int date = -1, y = 0, mo = 0, d = 0, hh = 0, mm = 0, ss = 0;
    if (!printable(p, e))
        return 0;
    while (1) {
        p = past_spaces(p, e);
        if (p >= e)
            break;
        const uint8_t *s = p;
        p = to_space(p, e);
        if (t >= L->nf)
            return 0;
        int64_t len = p - s;
        switch (L->kinds[t]) {
        case 'n':
            if (len == 1 && *s == '-') {
                f64[k] = __builtin_nan("");
            } else {
                if (len > 8)
                    return 0;
                int64_t v = 0;
                for (int64_t i = 0; i < len; i++) {
                    if (!IS_DIGIT(s[i]))
                        return 0;
                    v = v * 10 + (s[i] - '0');
                }
                f64[k] = (double)v;
            }
            k++;
            break;
        case 'd':
            if (len != 8)
                return 0;
            for (int i = 0; i < 8; i++)
                if (!IS_DIGIT(s[i]))
                    return 0;
            y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
            mo = (s[4] - '0') * 10 + (s[5] - '0');
            d = (s[6] - '0') * 10 + (s[7] - '0');
            date = 1;
            break;
        case 't':
            if (len != 8 || s[2] != ':' || s[5] != ':')
                return 0;
            for (int i = 0; i < 8; i++)
                if (i != 2 && i != 5 && !IS_DIGIT(s[i]))
                    return 0;
            hh = (s[0] - '0') * 10 + (s[1] - '0');
            mm = (s[3] - '0') * 10 + (s[4] - '0');
            ss = (s[6] - '0') * 10 + (s[7] - '0');
            break;
        case 'x':
            if (cur_len + len + 1 > DMON_EXTRA_BYTES)
                return 0;
            memcpy(L->cur + cur_len, s, (size_t)len);
            cur_len += (int)len;
            L->cur[cur_len++] = ' ';
            break;
        default:
            break;
        }
        t++;
    }
    if (t != L->nf)
        return 0;
    i64[0] = 0;
    if (date == 1) {
        if (y < 1970 || y > 2200 || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo))
            return 0;
        if (hh > 23 || mm > 59 || ss > 59)
            return 0;
        i64[0] = (days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + hh * 3600 + mm * 60 + ss) * 1000000;
    }
    i64[1] = L->rows == 0 || cur_len != L->prev_len || memcmp(L->cur, L->prev, (size_t)cur_len) != 0;
    memcpy(L->prev, L->cur, (size_t)cur_len);
    L->prev_len = cur_len;
    L->rows++;
    return 1;
}

PyDoc_STRVAR(dmon_rows_doc,
             "dmon_rows(stream, n, kinds, i64, f64) -> int\n\n"
             "Read the n strings of an Arrow stream as `nvidia-smi dmon` data rows of the fields `kinds` (bytes,\n"
             "one a field: b'n' a number, b'd' the date, b't' the time of day, b'x' an `extra` field, b's' one\n"
             "skipped): f64[j*n + i] the j-th number of row i (NaN for `-`), i64[i] its time in microseconds\n"
             "(0 without a date and a time field), i64[n + i] 1 where its `extra` tokens differ from row i-1's.\n"
             "Returns how many rows from the first it read: n when all (a row of another shape stops it).");

static PyObject *dmon_rows(PyObject *self, PyObject *args) {
    PyObject *capsule, *i64_o, *f64_o;
    Py_ssize_t n;
    const char *kinds;
    Py_ssize_t nf;
    (void)self;
    if (!PyArg_ParseTuple(args, "Ony#OO", &capsule, &n, &kinds, &nf, &i64_o, &f64_o))
        return NULL;
    int n_num = 0, dates = 0, times = 0;
    for (Py_ssize_t j = 0; j < nf; j++) {
        if (strchr("ndtxs", kinds[j]) == NULL || kinds[j] == 0) {
            PyErr_SetString(PyExc_ValueError, "dmon_rows: kinds are b'n', b'd', b't', b'x' or b's'");
            return NULL;
        }
        n_num += kinds[j] == 'n';
        dates += kinds[j] == 'd';
        times += kinds[j] == 't';
    }
    if (nf < 1 || n_num > MAX_FIELDS || dates != times || dates > 1) {
        PyErr_SetString(PyExc_ValueError, "dmon_rows: 1 field or more, at most 64 numbers, one date and time or none");
        return NULL;
    }
    dmon_layout *L = (dmon_layout *)calloc(1, sizeof(dmon_layout));
    if (L == NULL)
        return PyErr_NoMemory();
    L->kinds = kinds;
    L->nf = (int)nf;
    PyObject *got = scan_into(capsule, n, i64_o, f64_o, dmon_row, L, 2, n_num, "dmon_rows");
    free(L);
    return got;
}

static PyMethodDef methods[] = {
    {"titan", titan, METH_VARARGS, titan_doc},
    {"meg_entries", meg_entries, METH_VARARGS, meg_entries_doc},
    {"meg_iterations", meg_iterations, METH_VARARGS, meg_iterations_doc},
    {"csv_cells", csv_cells, METH_VARARGS, csv_cells_doc},
    {"json_objects", json_objects, METH_VARARGS, json_objects_doc},
    {"lines", lines, METH_VARARGS, lines_doc},
    {"coll_groups", coll_groups, METH_VARARGS, coll_groups_doc},
    {"ds_timers", ds_timers, METH_VARARGS, ds_timers_doc},
    {"dmesg_iso", dmesg_iso, METH_VARARGS, dmesg_iso_doc},
    {"dmesg_raw", dmesg_raw, METH_VARARGS, dmesg_raw_doc},
    {"dmon_rows", dmon_rows, METH_VARARGS, dmon_rows_doc},
    {"contains", (PyCFunction)(void (*)(void))contains, METH_FASTCALL, contains_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_fastscan", "Compiled scanners for line shapes of the parsers' fast lanes.", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fastscan(void) { return PyModule_Create(&module); }
