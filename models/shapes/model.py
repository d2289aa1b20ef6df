"""The narrow R-101-FPN Mask R-CNN of the shapes demo model, built from torchvision 0.14 parts.

torchvision's ResNet hard-codes a 64-channel stem and 256..2048 stage widths, so the body is
assembled here from torchvision's own `Bottleneck` blocks with the widths of
configs/mask_rcnn_R-101-FPN_shapes.json.  Module names are torchvision's (conv1, bn1,
layer1..4, downsample.0/1; fpn inner/layer blocks; rpn.head; roi_heads.*), so the state dict
converts with models/convert.py's torchvision path unchanged.

WIDTHS mirrors the config keys (detectron2's knobs): a quarter of the R-101 widths.
"""

import torch
import torch.nn as nn
from torchvision.models.detection import MaskRCNN
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.backbone_utils import BackboneWithFPN
from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor
from torchvision.models.resnet import Bottleneck
from torchvision.ops.misc import FrozenBatchNorm2d

CLASS_NAMES = ["__background__", "circle", "square", "triangle", "star"]

# Keys of configs/mask_rcnn_R-101-FPN_shapes.json that shape the network.
WIDTHS = dict(stem_out_channels=16, res2_out_channels=64, width_per_group=16,
              fpn_out_channels=64, fc_dim=256, mask_conv_dim=64)
BLOCKS_R101 = (3, 4, 23, 3)
ANCHOR_SIZES = ((16,), (32,), (64,), (128,), (256,))
ASPECT_RATIOS = (0.5, 1.0, 2.0)
MIN_SIZE, MAX_SIZE = 224, 320


class NarrowResNet(nn.Module):
    """torchvision.models.resnet.ResNet's layout and names with configurable widths; no fc."""

    def __init__(self, stem, res2_out, width_per_group, blocks=BLOCKS_R101, norm_layer=nn.BatchNorm2d):
        super().__init__()
        self.conv1 = nn.Conv2d(3, stem, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = norm_layer(stem)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        inplanes = stem
        for s, n in enumerate(blocks):
            planes = (res2_out // Bottleneck.expansion) << s  # Bottleneck's output is planes * 4
            stride = 1 if s == 0 else 2                       # stride in the 3x3 (torchvision)
            out = planes * Bottleneck.expansion
            down = nn.Sequential(nn.Conv2d(inplanes, out, 1, stride=stride, bias=False), norm_layer(out))
            # Bottleneck width = int(planes * base_width / 64) * groups: base_width sets it.
            base = 64 * width_per_group // (res2_out // Bottleneck.expansion)  # width = wpg << s
            layers = [Bottleneck(inplanes, planes, stride, down, base_width=base, norm_layer=norm_layer)]
            layers += [Bottleneck(out, planes, base_width=base, norm_layer=norm_layer) for _ in range(1, n)]
            setattr(self, f"layer{s + 1}", nn.Sequential(*layers))
            inplanes = out
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
        # Zero-initialised last BN of each residual branch: every block starts as the identity,
        # which is what lets a 101-layer net train from scratch in an hour.
        for m in self.modules():
            if isinstance(m, Bottleneck) and isinstance(m.bn3, nn.BatchNorm2d):
                nn.init.zeros_(m.bn3.weight)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer4(self.layer3(self.layer2(self.layer1(x))))


def build_model(frozen_bn=False, num_classes=len(CLASS_NAMES), min_size=MIN_SIZE, max_size=MAX_SIZE, **rcnn_kwargs):
    """frozen_bn=False: trainable BatchNorm (training); True: FrozenBatchNorm2d (eps 1e-5),
    the inference model whose numbers the engine must reproduce."""
    w = WIDTHS
    norm = FrozenBatchNorm2d if frozen_bn else nn.BatchNorm2d
    body = NarrowResNet(w["stem_out_channels"], w["res2_out_channels"], w["width_per_group"], norm_layer=norm)
    c2 = w["res2_out_channels"]
    backbone = BackboneWithFPN(body, {"layer1": "0", "layer2": "1", "layer3": "2", "layer4": "3"},
                               [c2, 2 * c2, 4 * c2, 8 * c2], w["fpn_out_channels"])
    F = w["fpn_out_channels"]
    anchors = AnchorGenerator(ANCHOR_SIZES, (ASPECT_RATIOS,) * len(ANCHOR_SIZES))
    model = MaskRCNN(
        backbone, num_classes=None, min_size=min_size, max_size=max_size,
        rpn_anchor_generator=anchors,
        box_head=TwoMLPHead(F * 7 * 7, w["fc_dim"]),
        box_predictor=FastRCNNPredictor(w["fc_dim"], num_classes),
        mask_head=MaskRCNNHeads(F, (w["mask_conv_dim"],) * 4, 1),
        mask_predictor=MaskRCNNPredictor(w["mask_conv_dim"], w["mask_conv_dim"], num_classes),
        **rcnn_kwargs)
    return model


def load_converted(model, path):
    """Load a converted model (models/convert.py's canonical safetensors, e.g. the shipped
    shapes_r101_narrow.safetensors; F16 widened to F32 exactly) into `model` through convert.py's
    torchvision names.  Needs models/ on sys.path."""
    import numpy as np
    import safetensors_io
    from zoo_formats import SOURCE_FORMATS
    fmt = SOURCE_FORMATS["torchvision"]
    tensors, _ = safetensors_io.load(path)
    model.load_state_dict({fmt.source_name(k): torch.from_numpy(v.astype(np.float32)) for k, v in tensors.items()},
                          strict=True)
    return model


def frozen_copy(model, **rcnn_kwargs):
    """The inference model: FrozenBatchNorm2d with the trained running statistics (rcnn_kwargs:
    training-time sampling settings, when it is trained further)."""
    m = build_model(frozen_bn=True, min_size=model.transform.min_size[0], max_size=model.transform.max_size,
                    **rcnn_kwargs)
    sd = {k: v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    m.load_state_dict(sd, strict=True)
    return m.eval()
