#include "core/result.h"

#include <stdlib.h>
#include <string.h>

void result_free(mr_result *res)
{
    free(res->mask_storage);
    free(res->dets);
    memset(res, 0, sizeof *res);
}
