/* libFuzzer target: JPEG files through image_load, image_geometry and
 * image_preprocess (engine/ops/image_preprocess.c; body in fuzz_image.h), plus the EXIF
 * parser on its own: the input's bytes after the first APP1 marker found
 * (or the whole input) go to image_exif_orientation, whose result must be
 * 1..8 whatever the bytes. The seed corpus (corpus/jpeg) holds baseline,
 * progressive, greyscale and EXIF-oriented JPEGs. */
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
