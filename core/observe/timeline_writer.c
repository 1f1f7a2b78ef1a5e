/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The timeline's bytes: the JSON string escaper, the growable event
 * buffer and the trace file, which stays a valid JSON array after every
 * append because each append overwrites the closing "\n]" with the new
 * events followed by a new "\n]", in one pwrite. Layer: core/observe; calls
 * core/base only.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/base/error.h"
#include "core/observe/timeline.h"
#include "core/observe/timeline_impl.h"

/* Length of the valid UTF-8 sequence at s (1-4), or 0 if there is none. */
static size_t cg__utf8_len(const unsigned char *s)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xbf;
    size_t n;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4;
    else
        return 0;
    /* The second byte's range excludes overlong forms and surrogates. */
    if (c == 0xe0)
        lo = 0xa0;
    else if (c == 0xed)
        hi = 0x9f;
    else if (c == 0xf0)
        lo = 0x90;
    else if (c == 0xf4)
        hi = 0x8f;
    if (s[1] < lo || s[1] > hi)
        return 0;
    for (size_t i = 2; i < n; i++)
        if (s[i] < 0x80 || s[i] > 0xbf)
            return 0;
    return n;
}

size_t cg_json_escape(char *dst, size_t dst_len, const char *src)
{
    const unsigned char *s = (const unsigned char *)src;
    size_t o = 0;

    if (dst_len == 0)
        return 0;
    while (*s != '\0') {
        char esc[8];
        const char *out = esc;
        size_t n = 1, adv = 1;

        switch (*s) {
        case '"': out = "\\\"", n = 2; break;
        case '\\': out = "\\\\", n = 2; break;
        case '\n': out = "\\n", n = 2; break;
        case '\r': out = "\\r", n = 2; break;
        case '\t': out = "\\t", n = 2; break;
        case '\b': out = "\\b", n = 2; break;
        case '\f': out = "\\f", n = 2; break;
        default:
            if (*s < 0x20) {
                n = (size_t)snprintf(esc, sizeof(esc), "\\u%04x", *s);
            } else {
                adv = cg__utf8_len(s);
                if (adv == 0) { /* not UTF-8: the replacement character */
                    out = "\\ufffd";
                    n = 6;
                    adv = 1;
                } else {
                    out = (const char *)s;
                    n = adv;
                }
            }
        }
        if (o + n >= dst_len)
            break;
        memcpy(dst + o, out, n);
        o += n;
        s += adv;
    }
    dst[o] = '\0';
    return o;
}

bool cg__tl_buf_reserve(cg__tl_buf_t *b, const cg_mem_ops_t *mem, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 64 * 1024;
        char *p;

        while (cap < b->len + n)
            cap *= 2;
        p = cg_mem_alloc(mem, CG_MEM_CAT_CONTROL, cap);
        if (p == NULL)
            return false;
        if (b->len > 0)
            memcpy(p, b->p, b->len);
        cg_mem_free(mem, CG_MEM_CAT_CONTROL, b->p, b->cap);
        b->p = p;
        b->cap = cap;
    }
    return true;
}

bool cg__tl_buf_append(cg__tl_buf_t *b, const cg_mem_ops_t *mem, const char *s,
                       size_t n)
{
    if (!cg__tl_buf_reserve(b, mem, n))
        return false;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return true;
}

void cg__tl_buf_free(cg__tl_buf_t *b, const cg_mem_ops_t *mem)
{
    cg_mem_free(mem, CG_MEM_CAT_CONTROL, b->p, b->cap);
    b->p = NULL;
    b->len = b->cap = 0;
}

/* Writes all of buf at off (pwrite may write less than asked). */
static cg_status_t cg__pwrite_all(const cg__tl_file_t *f, const char *buf,
                                  size_t len, uint64_t off)
{
    while (len > 0) {
        ssize_t n = pwrite(f->fd, buf, len, (off_t)off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return cg_error_set(CG_ERR_IO, "timeline %s: write of %zu bytes "
                                "at offset %llu failed: %m", f->path, len,
                                (unsigned long long)off);
        buf += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return CG_OK;
}

cg_status_t cg__tl_file_open(cg__tl_file_t *f, const char *path,
                             const char *head, size_t head_len)
{
    cg_status_t st;

    if (strlen(path) >= sizeof(f->path))
        return cg_error_set(CG_ERR_INVALID_PARAM, "timeline path '%.64s...' "
                            "is %zu bytes long, at most %zu allowed", path,
                            strlen(path), sizeof(f->path) - 1);
    snprintf(f->path, sizeof(f->path), "%s", path);
    f->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (f->fd < 0)
        return cg_error_set(CG_ERR_IO, "cannot create the timeline file %s: "
                            "%m", path);
    st = cg__pwrite_all(f, head, head_len, 0);
    if (st == CG_OK)
        st = cg__pwrite_all(f, "\n]", 2, head_len);
    if (st != CG_OK) {
        close(f->fd);
        f->fd = -1;
        return st;
    }
    f->off = head_len;
    return CG_OK;
}

cg_status_t cg__tl_file_append(cg__tl_file_t *f, cg__tl_buf_t *b,
                               const cg_mem_ops_t *mem)
{
    size_t len = b->len;
    cg_status_t st;

    if (len == 0)
        return CG_OK;
    if (!cg__tl_buf_append(b, mem, "\n]", 2)) {
        b->len = 0;
        return cg_error_set(CG_ERR_NO_MEMORY, "timeline %s: no memory to "
                            "close %zu bytes of events", f->path, len);
    }
    st = cg__pwrite_all(f, b->p, len + 2, f->off);
    b->len = 0;
    if (st == CG_OK)
        f->off += len;
    return st;
}

void cg__tl_file_close(cg__tl_file_t *f)
{
    if (f->fd >= 0)
        close(f->fd);
    f->fd = -1;
}
