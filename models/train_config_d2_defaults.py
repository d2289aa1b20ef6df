"""detectron2's yaml config keys and defaults (data only; train_config_d2.py reads them).

Written from detectron2/config/defaults.py at facebookresearch/detectron2 02b5c4e (2026-06):
every key of its `_C` with its default value (tuples as detectron2 writes them; yacs keeps
the type), so that a yaml is merged over the same tree detectron2 merges it over.  Each key
is in one of three groups:

- read by train_config_d2.py (the mapping to our keys and its refusals): READ below;
- TRAINING: affects training only (solver, losses, samplers, train-time augmentation and
  data, checkpoints, logging): ignored at inference, listed with -v;
- INERT: read by detectron2 only inside a component this converter refuses (keypoint,
  semantic and panoptic heads, RetinaNet, cascade heads, test-time augmentation, deformable
  convs, precomputed proposals): ignored, as detectron2 ignores them, because the switch
  that would use them is refused.

tests/parity/test_train_config.py checks that every key is in exactly one group.
"""

DEFAULTS = {
    "VERSION": 2,
    "MODEL": {
        "LOAD_PROPOSALS": False,
        "MASK_ON": False,
        "KEYPOINT_ON": False,
        "DEVICE": "cuda",
        "META_ARCHITECTURE": "GeneralizedRCNN",
        "WEIGHTS": "",
        "PIXEL_MEAN": [103.530, 116.280, 123.675],
        "PIXEL_STD": [1.0, 1.0, 1.0],
        "BACKBONE": {"NAME": "build_resnet_backbone", "FREEZE_AT": 2},
        "FPN": {"IN_FEATURES": [], "OUT_CHANNELS": 256, "NORM": "", "FUSE_TYPE": "sum"},
        "PROPOSAL_GENERATOR": {"NAME": "RPN", "MIN_SIZE": 0},
        "ANCHOR_GENERATOR": {
            "NAME": "DefaultAnchorGenerator",
            "SIZES": [[32, 64, 128, 256, 512]],
            "ASPECT_RATIOS": [[0.5, 1.0, 2.0]],
            "ANGLES": [[-90, 0, 90]],
            "OFFSET": 0.0,
        },
        "RPN": {
            "HEAD_NAME": "StandardRPNHead",
            "IN_FEATURES": ["res4"],
            "BOUNDARY_THRESH": -1,
            "IOU_THRESHOLDS": [0.3, 0.7],
            "IOU_LABELS": [0, -1, 1],
            "BATCH_SIZE_PER_IMAGE": 256,
            "POSITIVE_FRACTION": 0.5,
            "BBOX_REG_LOSS_TYPE": "smooth_l1",
            "BBOX_REG_LOSS_WEIGHT": 1.0,
            "BBOX_REG_WEIGHTS": (1.0, 1.0, 1.0, 1.0),
            "SMOOTH_L1_BETA": 0.0,
            "LOSS_WEIGHT": 1.0,
            "PRE_NMS_TOPK_TRAIN": 12000,
            "PRE_NMS_TOPK_TEST": 6000,
            "POST_NMS_TOPK_TRAIN": 2000,
            "POST_NMS_TOPK_TEST": 1000,
            "NMS_THRESH": 0.7,
            "CONV_DIMS": [-1],
        },
        "ROI_HEADS": {
            "NAME": "Res5ROIHeads",
            "NUM_CLASSES": 80,
            "IN_FEATURES": ["res4"],
            "IOU_THRESHOLDS": [0.5],
            "IOU_LABELS": [0, 1],
            "BATCH_SIZE_PER_IMAGE": 512,
            "POSITIVE_FRACTION": 0.25,
            "SCORE_THRESH_TEST": 0.05,
            "NMS_THRESH_TEST": 0.5,
            "PROPOSAL_APPEND_GT": True,
        },
        "ROI_BOX_HEAD": {
            "NAME": "",
            "BBOX_REG_LOSS_TYPE": "smooth_l1",
            "BBOX_REG_LOSS_WEIGHT": 1.0,
            "BBOX_REG_WEIGHTS": (10.0, 10.0, 5.0, 5.0),
            "SMOOTH_L1_BETA": 0.0,
            "POOLER_RESOLUTION": 14,
            "POOLER_SAMPLING_RATIO": 0,
            "POOLER_TYPE": "ROIAlignV2",
            "NUM_FC": 0,
            "FC_DIM": 1024,
            "NUM_CONV": 0,
            "CONV_DIM": 256,
            "NORM": "",
            "CLS_AGNOSTIC_BBOX_REG": False,
            "TRAIN_ON_PRED_BOXES": False,
            "USE_FED_LOSS": False,
            "USE_SIGMOID_CE": False,
            "FED_LOSS_FREQ_WEIGHT_POWER": 0.5,
            "FED_LOSS_NUM_CLASSES": 50,
        },
        "ROI_BOX_CASCADE_HEAD": {
            "BBOX_REG_WEIGHTS": ((10.0, 10.0, 5.0, 5.0), (20.0, 20.0, 10.0, 10.0), (30.0, 30.0, 15.0, 15.0)),
            "IOUS": (0.5, 0.6, 0.7),
        },
        "ROI_MASK_HEAD": {
            "NAME": "MaskRCNNConvUpsampleHead",
            "POOLER_RESOLUTION": 14,
            "POOLER_SAMPLING_RATIO": 0,
            "NUM_CONV": 0,
            "CONV_DIM": 256,
            "NORM": "",
            "CLS_AGNOSTIC_MASK": False,
            "POOLER_TYPE": "ROIAlignV2",
        },
        "ROI_KEYPOINT_HEAD": {
            "NAME": "KRCNNConvDeconvUpsampleHead",
            "POOLER_RESOLUTION": 14,
            "POOLER_SAMPLING_RATIO": 0,
            "CONV_DIMS": (512, 512, 512, 512, 512, 512, 512, 512),
            "NUM_KEYPOINTS": 17,
            "MIN_KEYPOINTS_PER_IMAGE": 1,
            "NORMALIZE_LOSS_BY_VISIBLE_KEYPOINTS": True,
            "LOSS_WEIGHT": 1.0,
            "POOLER_TYPE": "ROIAlignV2",
        },
        "SEM_SEG_HEAD": {
            "NAME": "SemSegFPNHead",
            "IN_FEATURES": ["p2", "p3", "p4", "p5"],
            "IGNORE_VALUE": 255,
            "NUM_CLASSES": 54,
            "CONVS_DIM": 128,
            "COMMON_STRIDE": 4,
            "NORM": "GN",
            "LOSS_WEIGHT": 1.0,
        },
        "PANOPTIC_FPN": {
            "INSTANCE_LOSS_WEIGHT": 1.0,
            "COMBINE": {
                "ENABLED": True,
                "OVERLAP_THRESH": 0.5,
                "STUFF_AREA_LIMIT": 4096,
                "INSTANCES_CONFIDENCE_THRESH": 0.5,
            },
        },
        "RETINANET": {
            "NUM_CLASSES": 80,
            "IN_FEATURES": ["p3", "p4", "p5", "p6", "p7"],
            "NUM_CONVS": 4,
            "IOU_THRESHOLDS": [0.4, 0.5],
            "IOU_LABELS": [0, -1, 1],
            "PRIOR_PROB": 0.01,
            "SCORE_THRESH_TEST": 0.05,
            "TOPK_CANDIDATES_TEST": 1000,
            "NMS_THRESH_TEST": 0.5,
            "BBOX_REG_WEIGHTS": (1.0, 1.0, 1.0, 1.0),
            "FOCAL_LOSS_GAMMA": 2.0,
            "FOCAL_LOSS_ALPHA": 0.25,
            "SMOOTH_L1_LOSS_BETA": 0.1,
            "BBOX_REG_LOSS_TYPE": "smooth_l1",
            "NORM": "",
        },
        "RESNETS": {
            "DEPTH": 50,
            "OUT_FEATURES": ["res4"],
            "NUM_GROUPS": 1,
            "NORM": "FrozenBN",
            "WIDTH_PER_GROUP": 64,
            "STRIDE_IN_1X1": True,
            "RES5_DILATION": 1,
            "RES2_OUT_CHANNELS": 256,
            "STEM_OUT_CHANNELS": 64,
            "DEFORM_ON_PER_STAGE": [False, False, False, False],
            "DEFORM_MODULATED": False,
            "DEFORM_NUM_GROUPS": 1,
        },
    },
    "INPUT": {
        "MIN_SIZE_TRAIN": (800,),
        "MIN_SIZE_TRAIN_SAMPLING": "choice",
        "MAX_SIZE_TRAIN": 1333,
        "MIN_SIZE_TEST": 800,
        "MAX_SIZE_TEST": 1333,
        "RANDOM_FLIP": "horizontal",
        "CROP": {"ENABLED": False, "TYPE": "relative_range", "SIZE": [0.9, 0.9]},
        "FORMAT": "BGR",
        "MASK_FORMAT": "polygon",
    },
    "DATASETS": {
        "TRAIN": (),
        "PROPOSAL_FILES_TRAIN": (),
        "PRECOMPUTED_PROPOSAL_TOPK_TRAIN": 2000,
        "TEST": (),
        "PROPOSAL_FILES_TEST": (),
        "PRECOMPUTED_PROPOSAL_TOPK_TEST": 1000,
    },
    "DATALOADER": {
        "NUM_WORKERS": 4,
        "ASPECT_RATIO_GROUPING": True,
        "SAMPLER_TRAIN": "TrainingSampler",
        "REPEAT_THRESHOLD": 0.0,
        "REPEAT_SQRT": True,
        "FILTER_EMPTY_ANNOTATIONS": True,
    },
    "SOLVER": {
        "LR_SCHEDULER_NAME": "WarmupMultiStepLR",
        "MAX_ITER": 40000,
        "BASE_LR": 0.001,
        "BASE_LR_END": 0.0,
        "MOMENTUM": 0.9,
        "NESTEROV": False,
        "WEIGHT_DECAY": 0.0001,
        "WEIGHT_DECAY_NORM": 0.0,
        "GAMMA": 0.1,
        "STEPS": (30000,),
        "NUM_DECAYS": 3,
        "WARMUP_FACTOR": 1.0 / 1000,
        "WARMUP_ITERS": 1000,
        "WARMUP_METHOD": "linear",
        "RESCALE_INTERVAL": False,
        "CHECKPOINT_PERIOD": 5000,
        "IMS_PER_BATCH": 16,
        "REFERENCE_WORLD_SIZE": 0,
        "BIAS_LR_FACTOR": 1.0,
        "WEIGHT_DECAY_BIAS": None,
        "CLIP_GRADIENTS": {"ENABLED": False, "CLIP_TYPE": "value", "CLIP_VALUE": 1.0, "NORM_TYPE": 2.0},
        "AMP": {"ENABLED": False},
    },
    "TEST": {
        "EXPECTED_RESULTS": [],
        "EVAL_PERIOD": 0,
        "KEYPOINT_OKS_SIGMAS": [],
        "DETECTIONS_PER_IMAGE": 100,
        "AUG": {
            "ENABLED": False,
            "MIN_SIZES": (400, 500, 600, 700, 800, 900, 1000, 1100, 1200),
            "MAX_SIZE": 4000,
            "FLIP": True,
        },
        "PRECISE_BN": {"ENABLED": False, "NUM_ITER": 200},
    },
    "OUTPUT_DIR": "./output",
    "SEED": -1,
    "CUDNN_BENCHMARK": False,
    "FLOAT32_PRECISION": "",
    "VIS_PERIOD": 0,
    "GLOBAL": {"HACK": 1.0},
}

# Training only (a key, or a section ending in "."): ignored.
TRAINING = (
    "MODEL.DEVICE", "MODEL.WEIGHTS", "MODEL.BACKBONE.FREEZE_AT",
    "MODEL.RPN.BOUNDARY_THRESH", "MODEL.RPN.IOU_THRESHOLDS", "MODEL.RPN.IOU_LABELS",
    "MODEL.RPN.BATCH_SIZE_PER_IMAGE", "MODEL.RPN.POSITIVE_FRACTION", "MODEL.RPN.BBOX_REG_LOSS_TYPE",
    "MODEL.RPN.BBOX_REG_LOSS_WEIGHT", "MODEL.RPN.SMOOTH_L1_BETA", "MODEL.RPN.LOSS_WEIGHT",
    "MODEL.RPN.PRE_NMS_TOPK_TRAIN", "MODEL.RPN.POST_NMS_TOPK_TRAIN",
    "MODEL.ROI_HEADS.IOU_THRESHOLDS", "MODEL.ROI_HEADS.IOU_LABELS", "MODEL.ROI_HEADS.BATCH_SIZE_PER_IMAGE",
    "MODEL.ROI_HEADS.POSITIVE_FRACTION", "MODEL.ROI_HEADS.PROPOSAL_APPEND_GT",
    "MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_TYPE", "MODEL.ROI_BOX_HEAD.BBOX_REG_LOSS_WEIGHT",
    "MODEL.ROI_BOX_HEAD.SMOOTH_L1_BETA", "MODEL.ROI_BOX_HEAD.TRAIN_ON_PRED_BOXES",
    "MODEL.ROI_BOX_HEAD.USE_FED_LOSS", "MODEL.ROI_BOX_HEAD.FED_LOSS_FREQ_WEIGHT_POWER",
    "MODEL.ROI_BOX_HEAD.FED_LOSS_NUM_CLASSES",
    "INPUT.MIN_SIZE_TRAIN", "INPUT.MIN_SIZE_TRAIN_SAMPLING", "INPUT.MAX_SIZE_TRAIN", "INPUT.RANDOM_FLIP",
    "INPUT.CROP.", "INPUT.MASK_FORMAT",
    "DATASETS.TRAIN", "DATASETS.PROPOSAL_FILES_TRAIN", "DATASETS.PRECOMPUTED_PROPOSAL_TOPK_TRAIN",
    "DATALOADER.", "SOLVER.", "TEST.EXPECTED_RESULTS", "TEST.EVAL_PERIOD", "TEST.PRECISE_BN.",
    "OUTPUT_DIR", "SEED", "CUDNN_BENCHMARK", "FLOAT32_PRECISION", "VIS_PERIOD", "GLOBAL.",
)

# Read only by a component that is refused (the key that would enable it): ignored.
INERT = {
    "MODEL.ROI_BOX_CASCADE_HEAD.": "MODEL.ROI_HEADS.NAME",
    "MODEL.ROI_KEYPOINT_HEAD.": "MODEL.KEYPOINT_ON",
    "TEST.KEYPOINT_OKS_SIGMAS": "MODEL.KEYPOINT_ON",
    "MODEL.SEM_SEG_HEAD.": "MODEL.META_ARCHITECTURE",
    "MODEL.PANOPTIC_FPN.": "MODEL.META_ARCHITECTURE",
    "MODEL.RETINANET.": "MODEL.META_ARCHITECTURE",
    "MODEL.RESNETS.DEFORM_MODULATED": "MODEL.RESNETS.DEFORM_ON_PER_STAGE",
    "MODEL.RESNETS.DEFORM_NUM_GROUPS": "MODEL.RESNETS.DEFORM_ON_PER_STAGE",
    "TEST.AUG.MIN_SIZES": "TEST.AUG.ENABLED",
    "TEST.AUG.MAX_SIZE": "TEST.AUG.ENABLED",
    "TEST.AUG.FLIP": "TEST.AUG.ENABLED",
    "DATASETS.PROPOSAL_FILES_TEST": "MODEL.LOAD_PROPOSALS",
    "DATASETS.PRECOMPUTED_PROPOSAL_TOPK_TEST": "MODEL.LOAD_PROPOSALS",
}


def leaves(tree, prefix=""):
    """Dotted keys of a nested dict's leaves, in order."""
    for k, v in tree.items():
        if isinstance(v, dict):
            yield from leaves(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}"


def _match(key, patterns):
    return any(key == p or (p.endswith(".") and key.startswith(p)) for p in patterns)


def group_of(key):
    """"training", "inert" or "read" (a key of DEFAULTS)."""
    if _match(key, TRAINING):
        return "training"
    if _match(key, INERT):
        return "inert"
    return "read"
