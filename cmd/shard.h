/* --shard K/N: the K-th of N parts of the inputs, so that N machines (a
 * Slurm array, a Kubernetes Indexed Job) share one input set with nothing
 * done twice and nothing left out, and `detect merge` can check it.
 *
 * An input belongs to part FNV-1a-64(path) mod N, the path as given (as
 * listed, or as the folder walk made it): each image is in exactly one part
 * whatever order the inputs are listed in, and the parts are about equal.
 * The input set as a whole is named by its fingerprint, FNV-1a-64 of the
 * sorted paths, each followed by '\n'; every shard of one run has the same. */
#ifndef DETECT_SHARD_H
#define DETECT_SHARD_H

#include <stdint.h>

#include "inputs.h"

typedef struct {
    int index, count; /* K and N; count 0: no --shard */
} shard_spec;

/* Parses "K/N" (0 <= K < N <= 1000000). */
int shard_parse(const char *text, shard_spec *out, cli_error *err);

/* 64-bit FNV-1a of a string. */
uint64_t shard_hash(const char *s);

/* This shard's part of the whole input set. */
typedef struct {
    shard_spec spec;
    int inputs;           /* all parts' inputs together */
    uint64_t fingerprint; /* of the whole set */
    int *position;        /* per input kept: its index among all inputs (the single run's order) */
} shard_plan;

/* Keeps the inputs of part spec.index in l (in their order; the others are
 * freed) and fills plan. Output names must be made unique before, over all
 * inputs, so that every part names an image's files alike. */
int shard_select(input_list *l, shard_spec spec, shard_plan *plan, cli_error *err);
void shard_plan_free(shard_plan *plan);

/* Per input kept, what became of it. */
enum { SHARD_NOT_REACHED = 0, SHARD_DONE, SHARD_FAILED };

/* The "shard" member of the shard's --json document, as JSON text
 * (malloc'ed; NULL when out of memory):
 *   {"index": K, "count": N, "inputs": all inputs, "fingerprint": "<16 hex>",
 *    "assigned": this part's inputs, "positions": [per "images" entry, its
 *    index among all inputs], "failed": [{"position": p, "file": path}],
 *    "coco_results": path of the shard's --coco-results from the document's
 *    folder, or null}
 * positions are in "images" order, which is input order (state[i] ==
 * SHARD_DONE); a part whose positions and failed do not add up to
 * "assigned" was interrupted. json_path/coco_path: the documents' paths. */
char *shard_member_json(const shard_plan *plan, const input_list *l, const unsigned char *state,
                        const char *json_path, const char *coco_path);

#endif
