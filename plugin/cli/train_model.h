/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The model of collguard-train-demo: the parameter and gradient tensors of
 * a small transformer (names and relative sizes as a framework would have
 * them), with deterministic contents that are exact in float32, so every
 * broadcast and averaged allreduce can be checked element by element
 * against a closed-form reference. Layer: plugin (a command); no library
 * calls.
 */
#ifndef CG_PLUGIN_CLI_TRAIN_MODEL_H
#define CG_PLUGIN_CLI_TRAIN_MODEL_H

#include <stddef.h>

typedef struct cg_demo_tensor {
    char name[96];
    size_t count;  /* elements (float32) */
    int ndim;
    long long shape[2];
    float *param;  /* broadcast from rank 0 at step 0 */
    float *grad;   /* averaged over ranks every step, in place */
    void *req;     /* the request in flight (cg_hvd_req_h) */
} cg_demo_tensor_t;

typedef struct cg_demo_model {
    cg_demo_tensor_t *t;
    int n;
    size_t elems;  /* total elements of all tensors */
} cg_demo_model_t;

/* A transformer of `layers` blocks, width `hidden`, vocabulary `vocab`:
 * embed.weight, layers.N.{ln1,attn.qkv,attn.proj,ln2,mlp.fc1,mlp.fc2}.
 * {weight,bias}, ln_f.{weight,bias}. Parameters get rank 0's values on
 * rank 0 and a rank-specific garbage elsewhere. Returns 0, or -1 when out
 * of memory (the model is then empty). */
int cg_demo_model_build(cg_demo_model_t *m, int layers, int hidden,
                        int vocab, int rank);
void cg_demo_model_free(cg_demo_model_t *m);

/* Writes this rank's gradients of a step: small integers times 2^-6. */
void cg_demo_fill_grads(cg_demo_model_t *m, int rank, int step);

/* Counts elements that differ from the reference: for grads the average
 * over nranks of every rank's values (as float32 sum, then times 1/nranks
 * in double, as collguard's average), for params rank 0's values. The
 * first difference is described in err (may stay empty). */
size_t cg_demo_check_grads(const cg_demo_model_t *m, int nranks, int step,
                           char *err, size_t len);
size_t cg_demo_check_params(const cg_demo_model_t *m, char *err,
                            size_t len);

#endif
