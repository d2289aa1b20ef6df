/* detect calibrate: the activation ranges that --precision int8 quantizes
 * with, measured by running the model in fp32 on example images, written
 * beside the weights (or to -o FILE). */
#ifndef DETECT_CALIBRATE_H
#define DETECT_CALIBRATE_H

/* argv[0] is "calibrate". Returns the exit status: 0 written, 1 written
 * but some images failed (each named), 2 a usage, config or weights error
 * or nothing to write. */
int calibrate_main(int argc, char **argv);

#endif
