/* The feature pyramid: 1x1 laterals on C2..C5, a nearest-neighbour top-down
 * path, 3x3 outputs P2..P5, and P6 as a 1x1 stride-2 max pool of P5. The
 * top-down sum is fused: the upsampled coarser level is written into the
 * lateral's output buffer and the lateral conv (its batchnorm folded, or
 * its GroupNorm after it: config fpn.norm) accumulates onto it. */
#include <stdio.h>

#include "model/model_internal.h"

mr_status fpn_load(mr_model *m, mr_weights *w, mr_error *err)
{
    const mr_fpn_config *fc = &m->cfg.fpn;
    int F = fc->out_channels;
    mr_norm_spec norm = model_norm_spec(fc->norm, fc->norm_eps, fc->norm_groups, "fpn");
    if (m->cfg.fpn.min_level != 2 || m->cfg.fpn.max_level < 5 || m->cfg.fpn.max_level > 6)
        return mr_fail(err, MR_ERR_UNSUPPORTED, "fpn levels %d..%d: only P2..P5 or P2..P6 are supported",
                       m->cfg.fpn.min_level, m->cfg.fpn.max_level);
    for (int s = 0; s < MR_STAGES; s++) {
        char name[64], normp[80];
        snprintf(name, sizeof name, "fpn.lateral%d", s + 2);
        snprintf(normp, sizeof normp, "%s.norm", name);
        mr_extent in = model_level_extent(m, 4 << s);
        /* the lateral's output (the top-down sum) is read by the level's
         * output conv and, upsampled, summed onto by the finer lateral */
        char output[64];
        snprintf(output, sizeof output, "fpn.output%d", s + 2);
        MR_TRY(model_norm_conv_load(m, w, name, normp, &norm, output, 0, m->stage[s].out, F, 1, 1, 0, 0, in,
                                    &m->fpn_lateral[s], err));
        snprintf(name, sizeof name, "fpn.output%d", s + 2);
        snprintf(normp, sizeof normp, "%s.norm", name);
        /* the level: read by the RPN's conv and by RoIAlign (P5 also by P6's pool) */
        MR_TRY(model_norm_conv_load(m, w, name, normp, &norm, "rpn.conv", 1, F, F, 3, 1, 1, 0, in, &m->fpn_output[s],
                                    err));
    }
    return MR_OK;
}

mr_status fpn_forward(mr_model *m, mr_error *err)
{
    mr_buffers *b = &m->buf;
    const mr_backend_i *be = m->be.i;
    int F = m->cfg.fpn.out_channels;
    MR_TRY(tensor_shape(&b->inner[MR_STAGES - 1], 1, b->c[MR_STAGES - 1].h, b->c[MR_STAGES - 1].w, F, err));
    for (int s = MR_STAGES - 1; s >= 0; s--) {
        const mr_tensor *c = &b->c[s];
        mr_tensor *inner = &b->inner[s];
        int top_down = s < MR_STAGES - 1; /* inner holds the coarser level, upsampled */
        MR_TRY(model_norm_conv_run(m, &m->fpn_lateral[s], c, inner, top_down, err));
        /* the finer level's top-down map, upsampled now, while inner is as the
         * lateral left it (the output conv may relayout it in place: the CPU's
         * blocked Winograd) */
        if (s > 0) {
            MR_TRY(tensor_shape(&b->inner[s - 1], 1, b->c[s - 1].h, b->c[s - 1].w, F, err));
            MR_TRY(be->upsample_nearest(m->be.ctx, inner, &b->inner[s - 1], err));
        }
        MR_TRY(tensor_shape(&b->p[s], 1, c->h, c->w, F, err));
        MR_TRY(model_norm_conv_run(m, &m->fpn_output[s], inner, &b->p[s], 0, err));
    }
    if (m->num_levels == 5) {
        const mr_tensor *p5 = &b->p[3];
        mr_pool_params pool = {1, 2, 0};
        MR_TRY(tensor_shape(&b->p[4], 1, (p5->h - 1) / 2 + 1, (p5->w - 1) / 2 + 1, F, err));
        MR_TRY(be->max_pool(m->be.ctx, &pool, p5, &b->p[4], err));
    }
    return MR_OK;
}
