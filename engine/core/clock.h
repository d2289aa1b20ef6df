/* The monotonic clock in seconds, for the stage times, decode times and
 * warm-up times the engine reports. */
#ifndef MR_CLOCK_H
#define MR_CLOCK_H

#include <time.h>

static inline double mr_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
