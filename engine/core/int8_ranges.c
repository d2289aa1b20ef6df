/* See int8_ranges.h. */
#include "core/int8_ranges.h"

#include <stdlib.h>
#include <string.h>

const mr_int8_range *int8_ranges_find(const mr_int8_ranges *r, const char *name)
{
    for (int i = 0; r && i < r->count; i++)
        if (strcmp(r->items[i].name, name) == 0) return &r->items[i];
    return NULL;
}

void int8_ranges_free(mr_int8_ranges *r)
{
    if (!r) return;
    free(r->items);
    r->items = NULL;
    r->count = 0;
}
