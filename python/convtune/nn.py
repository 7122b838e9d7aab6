"""Conv2d and Conv3d modules whose convolutions run through convtune.torch."""

from typing import Optional

import torch

from convtune import torch as ct


class Conv2d(torch.nn.Conv2d):
    """torch.nn.Conv2d (zero padding, numeric padding) through convtune."""

    def _conv_forward(self, x, weight, bias):
        return ct.conv2d(x, weight, bias, self.stride, self.padding,
                         self.dilation, self.groups)


class Conv3d(torch.nn.Conv3d):
    """torch.nn.Conv3d (zero padding, numeric padding) through convtune."""

    def _conv_forward(self, x, weight, bias):
        return ct.conv3d(x, weight, bias, self.stride, self.padding,
                         self.dilation, self.groups)


def from_torch(module) -> Optional[torch.nn.Module]:
    """A convtune module sharing `module`'s parameters, or None when it is not
    a Conv2d / Conv3d that convtune runs (other padding modes, string
    padding)."""
    for base, ours in ((torch.nn.Conv2d, Conv2d), (torch.nn.Conv3d, Conv3d)):
        if type(module) is base:
            if module.padding_mode != "zeros" or isinstance(module.padding, str):
                return None
            m = ours.__new__(ours)
            m.__dict__ = module.__dict__.copy()
            return m
    return None
