/* See int8_ranges.h. */
#include "core/int8_ranges.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const mr_int8_range *int8_ranges_find(const mr_int8_ranges *r, const char *name)
{
    for (int i = 0; r && i < r->count; i++)
        if (strcmp(r->items[i].name, name) == 0) return &r->items[i];
    return NULL;
}

mr_status int8_ranges_check_weights(const mr_int8_ranges *r, const mr_weights *w, uint64_t fp, mr_error *err)
{
    if (fp == r->weights_fnv1a64 && r->weights_bytes == (double)w->map_size) return MR_OK;
    return mr_fail(err, MR_ERR_CONFIG, "%s: made for other weights (%.0f bytes, fingerprint %016" PRIx64 "; %s has "
                   "%zu bytes, %016" PRIx64 "): calibrate again for these weights", r->path, r->weights_bytes,
                   r->weights_fnv1a64, w->path, w->map_size, fp);
}

void int8_ranges_free(mr_int8_ranges *r)
{
    if (!r) return;
    free(r->items);
    r->items = NULL;
    r->count = 0;
}
