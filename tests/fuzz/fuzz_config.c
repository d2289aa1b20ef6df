/* libFuzzer target: JSON text -> config_parse (engine/core/config.c).
 *
 * Any input must give MR_OK or an error status with a one-line message that
 * starts with the origin; on success the struct must pass config_validate
 * again and parse identically a second time (the parser is a pure function
 * of the text), and a failure must leave the caller's struct untouched. */
#include <string.h>

#include "core/config.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > (1u << 20)) return 0; /* config_load's MAX_CONFIG_BYTES */
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';

    static mr_config cfg, again, before;
    memset(&cfg, 0xA5, sizeof cfg);
    memcpy(&before, &cfg, sizeof cfg);
    mr_error err = {MR_OK, ""};
    mr_status st = config_parse(&cfg, text, "fuzz", &err);
    if (st == MR_OK) {
        mr_error err2 = {MR_OK, ""};
        mr_status vs = config_validate(&cfg, "fuzz", &err2);
        FUZZ_CHECK(vs == MR_OK, "parsed config fails validation: %s", err2.msg);
        memset(&again, 0x5A, sizeof again);
        FUZZ_CHECK(config_parse(&again, text, "fuzz", &err2) == MR_OK, "second parse failed: %s", err2.msg);
        FUZZ_CHECK(memcmp(&cfg, &again, sizeof cfg) == 0, "two parses of one text differ");
        int blocks[4];
        config_stage_blocks(&cfg, blocks);
        FUZZ_CHECK(blocks[0] > 0 && blocks[1] > 0 && blocks[2] > 0 && blocks[3] > 0,
                   "no stage blocks for depth %d", cfg.backbone.depth);
    } else {
        FUZZ_CHECK(err.status == st, "status %d, err.status %d", (int)st, (int)err.status);
        FUZZ_CHECK(strncmp(err.msg, "fuzz: ", 6) == 0, "message does not name the origin: %s", err.msg);
        FUZZ_CHECK(!strchr(err.msg, '\n'), "message has more than one line: %s", err.msg);
        FUZZ_CHECK(memcmp(&cfg, &before, sizeof cfg) == 0, "failed parse changed the config");
    }
    free(text);
    return 0;
}
