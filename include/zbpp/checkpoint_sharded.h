/* zbpp — sharded training checkpoints: one shard file per pipeline rank (the parameters it
 * updates + their AdamW moments) and a text manifest written last by rank 0.
 *
 * Files (docs/mpi.md has the exact layout):
 *   <path>                          manifest: format version, step, P, schedule, stage->rank map,
 *                                   partition, training config, data position, and per shard its
 *                                   file name, size and checksum; ends with its own checksum.
 *   <path>.<step>-<nonce>.rank<K>   shard of rank K (binary, checksummed by the manifest).
 * Every file is written atomically (temp + fsync + rename) and the manifest goes last, so until
 * the new manifest is in place the previous checkpoint (its manifest and its shards, which have
 * other names) is intact; old shards are removed only after the new manifest is committed. */
#ifndef ZBPP_CHECKPOINT_SHARDED_H
#define ZBPP_CHECKPOINT_SHARDED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zbpp/data.h"
#include "zbpp/error.h"
#include "zbpp/train.h"

#define ZB_CKPT_MANIFEST_MAGIC "zbpp-sharded-checkpoint"
#define ZB_CKPT_MANIFEST_VERSION 1

typedef struct {
    size_t off, count; /* elements of the whole model's flat parameter buffer (what the file says) */
    size_t loc;        /* where the range lies in the buffers passed to write / read-with-want:
                        * a rank's stage-local buffers; equal to off for whole-model buffers */
} zb_ckpt_range_t;

typedef struct {
    char file[256];    /* base name, in the manifest's directory */
    uint64_t bytes;
    uint64_t checksum; /* zb_hash_bytes of the whole file */
} zb_ckpt_shard_ref_t;

typedef struct {
    long step, skipped;
    int ranks, chunks, stages;
    char schedule[48];
    int *stage_rank; /* [stages] */
    int *first;      /* [stages + 1] partition */
    zb_train_config_t cfg; /* model + training fields as zb_train_peek fills them */
    size_t param_count;
    uint64_t data_fp, data_tokens, data_shards;
    zb_data_pos_t pos;
    zb_ckpt_shard_ref_t *shard; /* [ranks] */
    uint64_t hash;   /* of the manifest's text (read: as read; write: as written) */
} zb_ckpt_manifest_t;

/* True if `path` starts like a sharded checkpoint manifest. */
bool zb_ckpt_is_sharded(const char *path);

/* Allocate the arrays of a manifest for `ranks` and `stages` (zeroed). */
zb_status_t zb_ckpt_manifest_alloc(zb_ckpt_manifest_t *m, int ranks, int stages, zb_err_t *err);
void zb_ckpt_manifest_free(zb_ckpt_manifest_t *m);
/* Write atomically; fills m->hash. */
zb_status_t zb_ckpt_manifest_write(const char *path, zb_ckpt_manifest_t *m, zb_err_t *err);
/* Parse and check (magic, version, field ranges, trailing checksum). ZB_EFORMAT for anything
 * malformed, ZB_EIO if unreadable. Free with zb_ckpt_manifest_free. */
zb_status_t zb_ckpt_manifest_read(const char *path, zb_ckpt_manifest_t *m, zb_err_t *err);

/* Like zb_train_peek for a manifest: the stored model and training settings into *cfg. Also
 * checks, before a caller allocates that model, that the parameter count follows from the shape
 * and the shard files exist with the sizes given and can hold params, m and v (ZB_EFORMAT, or
 * ZB_EIO for a missing shard): a small manifest cannot name a model of gigabytes. */
zb_status_t zb_ckpt_sharded_peek(const char *path, zb_train_config_t *cfg, zb_err_t *err);

/* Write one shard atomically: the `n` ranges of params, m and v (each a full flat buffer of
 * param_count floats). *ref receives the base name's size and checksum (ref->file is set by the
 * caller). */
zb_status_t zb_ckpt_shard_write(const char *file, int rank, int ranks, long step,
                                const zb_ckpt_range_t *ranges, int n, const float *params,
                                const float *m, const float *v, size_t param_count,
                                zb_ckpt_shard_ref_t *ref, zb_err_t *err);

/* Read one shard, checking it against `ref` (size, checksum), rank and step, into full flat
 * buffers of param_count floats. If `want` is not NULL the shard's ranges must equal want[0..n)
 * (a rank resuming its own shard); `covered` (may be NULL, param_count bytes) gets 1 for each
 * element read. */
zb_status_t zb_ckpt_shard_read(const char *file, const zb_ckpt_shard_ref_t *ref, int rank,
                               long step, size_t param_count, const zb_ckpt_range_t *want, int n,
                               float *params, float *m, float *v, unsigned char *covered,
                               zb_err_t *err);

/* The same into the buffers of a (whole or stage-local) layout: only the shard's parameters that
 * `layout` holds are kept (params, m, v have layout's shape), read in bounded pieces; `covered`
 * (may be NULL, layout->count bytes) gets 1 for each element of layout's buffer written. */
zb_status_t zb_ckpt_shard_read_into(const char *file, const zb_ckpt_shard_ref_t *ref, int rank,
                                    long step, size_t param_count,
                                    const zb_gpt2_params_t *layout, float *params, float *m,
                                    float *v, unsigned char *covered, zb_err_t *err);

/* After the manifest at `path` (parsed as *m) is committed: remove the shards of earlier saves
 * that it does not reference, "<base>.<step>-<nonce>.rank<K>" with step <= m->step (left by a
 * save killed before its manifest, or by an old manifest nobody could read), and their unlocked
 * ".tmp.<pid>" files. Shards of later steps are left alone: they may be a save in progress.
 * Returns the number of files removed. Call from the one process that writes the manifest. */
int zb_ckpt_remove_orphans(const char *path, const zb_ckpt_manifest_t *m);

/* ZB_EMISMATCH naming the first setting of the manifest that differs from the trainer's (model,
 * batch, seq, microbatches, shuffle, seed, optimizer, LR schedule, data), like zb_train_load. */
zb_status_t zb_ckpt_manifest_check(const char *path, const zb_ckpt_manifest_t *m,
                                   const zb_trainer_t *t, zb_err_t *err);

#endif
