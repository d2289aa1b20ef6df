/* placeholder until the GroupNorm op lands (branch gn-op) */
#ifndef MR_GROUP_NORM_H
#define MR_GROUP_NORM_H
typedef struct {
    int channels, groups;
    float eps;
    int relu;
} mr_group_norm_params;
#endif
