/* libFuzzer target: JPEG files through image_load, image_geometry and
 * image_preprocess (engine/ops/image_preprocess.c; body in fuzz_image.h), plus the EXIF
 * parser on its own: the input's bytes after the first APP1 marker found
 * (or the whole input) go to image_exif_orientation, whose result must be
 * 1..8 whatever the bytes. The seed corpus (corpus/jpeg) holds baseline,
 * progressive, greyscale and EXIF-oriented JPEGs.
 *
 * The side limit is 1024 here, not the PNG target's 4096. Arithmetic coding
 * (SOF9/SOF10, a one-byte mutation of a seed's SOF0) codes a flat image in
 * almost nothing: 208 bytes hold a complete 4096x4096 JPEG
 * (regressions/jpeg/arithmetic_4096x4096.jpg), which takes 1.3 s per
 * execution under ASan against about 1 ms for the seeds, so a run that found
 * one spent most of its time there (issue 44: 110 executions/s, 22.7 min).
 * Deflate caps PNG's ratio near 1000:1, so the PNG target cannot reach such
 * sizes from a few KB. 1024x1024 is the bound libjpeg-turbo's own OSS-Fuzz
 * harness sets (1 megapixel); the limit's refusal path is exercised either way. */
#define FUZZ_MAX_SIDE 1024
#include "fuzz_image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const uint8_t *app1 = data;
    size_t n = size;
    for (size_t i = 0; i + 4 <= size; i++)
        if (data[i] == 0xFF && data[i + 1] == 0xE1) { /* APP1: 2-byte length, then the payload */
            app1 = data + i + 4;
            n = size - i - 4;
            break;
        }
    int o = image_exif_orientation(app1, n);
    FUZZ_CHECK(o >= 1 && o <= 8, "orientation %d", o);
    fuzz_image_file(data, size);
    return 0;
}
