/* libFuzzer target for the formats without a check of their own: WebP
 * (libwebp's animation decoder), TIFF (libtiff and our sample conversion),
 * GIF (giflib, our frame placement and palette lookup) and BMP (our own
 * reader), each through image_load, image_geometry and image_preprocess
 * (body in fuzz_image.h). scripts/fuzz.sh builds it once per format, as
 * fuzz_webp, fuzz_tiff, fuzz_gif and fuzz_bmp, each with its own seed
 * corpus (corpus/<format>, make_corpus.py), so each mutates from its own
 * format's files. */
#include "fuzz_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_image_file(data, size);
    return 0;
}
