/* Cell anchor tables; see anchors.h for the contract. */
#include "ops/anchors.h"

#include <math.h>

int anchors_cell(const float *sizes, int num_sizes, const float *ratios, int num_ratios, int round_base, float *out)
{
    if (num_sizes <= 0 || num_ratios <= 0) return 0;
    int k = 0;
    if (!round_base) {
        /* detectron2 DefaultAnchorGenerator.generate_cell_anchors, in Python
         * doubles then stored as float32: w = sqrt(size^2 / r), h = r * w.
         * It loops sizes outside ratios (size-major), unlike torchvision;
         * with one size per level, as every FPN config has, the orders agree. */
        for (int s = 0; s < num_sizes; s++)
            for (int r = 0; r < num_ratios; r++) {
                double size = sizes[s], w = sqrt(size * size / (double)ratios[r]), h = (double)ratios[r] * w;
                out[4 * k + 0] = (float)(-w / 2.0);
                out[4 * k + 1] = (float)(-h / 2.0);
                out[4 * k + 2] = (float)(w / 2.0);
                out[4 * k + 3] = (float)(h / 2.0);
                k++;
            }
        return k;
    }
    for (int r = 0; r < num_ratios; r++) {
        /* torch: h_ratios = sqrt(ratios), w_ratios = 1 / h_ratios, in float32 */
        float hr = sqrtf(ratios[r]);
        float wr = 1.0f / hr;
        for (int s = 0; s < num_sizes; s++) {
            float ws = wr * sizes[s];
            float hs = hr * sizes[s];
            float a[4] = {-ws / 2.0f, -hs / 2.0f, ws / 2.0f, hs / 2.0f};
            for (int j = 0; j < 4; j++) out[4 * k + j] = rintf(a[j]);
            k++;
        }
    }
    return k;
}

/* Detectron computes in float64 (numpy) and the values are integers or
 * halves, so double here and a final cast reproduce it exactly. np.round
 * rounds half to even, as rint does in the default rounding mode. */
int anchors_cell_detectron(float stride, const float *sizes, int num_sizes, const float *ratios, int num_ratios,
                           float *out)
{
    if (num_sizes <= 0 || num_ratios <= 0) return 0;
    double base = stride;
    double ctr = 0.5 * (base - 1.0); /* base box [0, 0, stride-1, stride-1] */
    double area = base * base;
    int k = 0;
    for (int r = 0; r < num_ratios; r++) {
        double ws = rint(sqrt(area / ratios[r]));
        double hs = rint(ws * ratios[r]);
        for (int s = 0; s < num_sizes; s++) {
            double scale = (double)sizes[s] / base;
            double w = ws * scale, h = hs * scale;
            out[4 * k + 0] = (float)(ctr - 0.5 * (w - 1.0));
            out[4 * k + 1] = (float)(ctr - 0.5 * (h - 1.0));
            out[4 * k + 2] = (float)(ctr + 0.5 * (w - 1.0));
            out[4 * k + 3] = (float)(ctr + 0.5 * (h - 1.0));
            k++;
        }
    }
    return k;
}
