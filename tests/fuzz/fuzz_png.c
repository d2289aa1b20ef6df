/* libFuzzer target: PNG files through image_load, image_geometry and
 * image_preprocess (engine/ops/image_preprocess.c; body in fuzz_image.h). The seed corpus
 * (corpus/png) holds every colour type, bit depth and interlace. */
#include "fuzz_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_image_file(data, size);
    return 0;
}
