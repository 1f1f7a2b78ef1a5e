/* SPDX-License-Identifier: Apache-2.0 */
/*
 * collguard-train-demo's model: the tensor list of a small transformer and
 * its deterministic, float32-exact contents. A gradient element depends
 * on (rank, step, tensor, index mod 64) and a parameter on (tensor, index
 * mod 256), so fill and check run from small tables. Layer: plugin (a
 * command); calls only the C library.
 */
#include "plugin/cli/train_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Gradient of rank r, step s, tensor t at index i: an integer in
 * [-32, 31] times 2^-6; sums over up to 2^17 ranks stay exact. */
static int cg__grad_int(int r, int s, int t, size_t i)
{
    unsigned k = (unsigned)(r + 1) * 3u + (unsigned)s * 5u + (unsigned)t * 7u;
    return (int)((k + (unsigned)(i & 63)) & 63u) - 32;
}

static float cg__param(int t, size_t i)
{
    return (float)((int)(((unsigned)t * 13u + (unsigned)(i & 255)) & 255u) -
                   128) / 256.0f;
}

static int cg__add(cg_demo_model_t *m, int *cap, const char *name,
                   long long d0, long long d1)
{
    cg_demo_tensor_t *t;

    if (m->n == *cap) {
        int ncap = *cap ? *cap * 2 : 64;
        void *p = realloc(m->t, (size_t)ncap * sizeof(*m->t));
        if (p == NULL)
            return -1;
        m->t = p;
        *cap = ncap;
    }
    t = &m->t[m->n];
    memset(t, 0, sizeof(*t));
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->ndim = d1 > 0 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->count = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    t->param = malloc(t->count * sizeof(float));
    t->grad = malloc(t->count * sizeof(float));
    m->n++;
    if (t->param == NULL || t->grad == NULL)
        return -1;
    m->elems += t->count;
    return 0;
}

/* The tensors of one block, in the order a framework registers them. */
static int cg__add_block(cg_demo_model_t *m, int *cap, int l, long long h)
{
    static const struct {
        const char *name;
        int rows, cols; /* multiples of the width (cols 0: a vector) */
    } rows[] = {
        {"ln1.weight", 1, 0},      {"ln1.bias", 1, 0},
        {"attn.qkv.weight", 3, 1}, {"attn.qkv.bias", 3, 0},
        {"attn.proj.weight", 1, 1}, {"attn.proj.bias", 1, 0},
        {"ln2.weight", 1, 0},      {"ln2.bias", 1, 0},
        {"mlp.fc1.weight", 4, 1},  {"mlp.fc1.bias", 4, 0},
        {"mlp.fc2.weight", 1, 4},  {"mlp.fc2.bias", 1, 0},
    };
    char name[96];

    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        snprintf(name, sizeof(name), "layers.%d.%s", l, rows[i].name);
        if (cg__add(m, cap, name, rows[i].rows * h, rows[i].cols * h) != 0)
            return -1;
    }
    return 0;
}

int cg_demo_model_build(cg_demo_model_t *m, int layers, int hidden,
                        int vocab, int rank)
{
    int cap = 0, rc;

    memset(m, 0, sizeof(*m));
    rc = cg__add(m, &cap, "embed.weight", vocab, hidden);
    for (int l = 0; l < layers && rc == 0; l++)
        rc = cg__add_block(m, &cap, l, hidden);
    if (rc == 0)
        rc = cg__add(m, &cap, "ln_f.weight", hidden, 0);
    if (rc == 0)
        rc = cg__add(m, &cap, "ln_f.bias", hidden, 0);
    if (rc != 0) {
        cg_demo_model_free(m);
        return -1;
    }
    for (int t = 0; t < m->n; t++)
        for (size_t i = 0; i < m->t[t].count; i++)
            m->t[t].param[i] = rank == 0 ? cg__param(t, i)
                                         : (float)(-rank - 1);
    return 0;
}

void cg_demo_model_free(cg_demo_model_t *m)
{
    for (int t = 0; t < m->n; t++) {
        free(m->t[t].param);
        free(m->t[t].grad);
    }
    free(m->t);
    memset(m, 0, sizeof(*m));
}

void cg_demo_fill_grads(cg_demo_model_t *m, int rank, int step)
{
    float v[64];

    for (int t = 0; t < m->n; t++) {
        float *g = m->t[t].grad;
        for (size_t j = 0; j < 64; j++)
            v[j] = (float)cg__grad_int(rank, step, t, j) / 64.0f;
        for (size_t i = 0; i < m->t[t].count; i++)
            g[i] = v[i & 63];
    }
}

size_t cg_demo_check_grads(const cg_demo_model_t *m, int nranks, int step,
                           char *err, size_t len)
{
    size_t bad = 0;
    float ref[64];

    for (int t = 0; t < m->n; t++) {
        const float *g = m->t[t].grad;
        for (size_t j = 0; j < 64; j++) {
            int sum = 0;
            for (int r = 0; r < nranks; r++)
                sum += cg__grad_int(r, step, t, j);
            ref[j] = (float)((double)((float)sum / 64.0f) *
                             (1.0 / nranks));
        }
        for (size_t i = 0; i < m->t[t].count; i++) {
            if (g[i] == ref[i & 63])
                continue;
            if (bad++ == 0 && len > 0)
                snprintf(err, len, "step %d: gradient %s[%zu] is %.9g, "
                         "expected %.9g", step, m->t[t].name, i,
                         (double)g[i], (double)ref[i & 63]);
        }
    }
    return bad;
}

size_t cg_demo_check_params(const cg_demo_model_t *m, char *err, size_t len)
{
    size_t bad = 0;

    for (int t = 0; t < m->n; t++) {
        const float *p = m->t[t].param;
        for (size_t i = 0; i < m->t[t].count; i++) {
            if (p[i] == cg__param(t, i))
                continue;
            if (bad++ == 0 && len > 0)
                snprintf(err, len, "parameter %s[%zu] is %.9g after the "
                         "broadcast, rank 0 has %.9g", m->t[t].name, i,
                         (double)p[i], (double)cg__param(t, i));
        }
    }
    return bad;
}
