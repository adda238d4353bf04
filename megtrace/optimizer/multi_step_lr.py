"""`MultiStepLR`: the learning rate is multiplied by `gamma` at each milestone epoch."""
from __future__ import annotations

from bisect import bisect_right
from typing import Iterable as Iter

from .lr_scheduler import LRScheduler
from .optimizer import Optimizer

_STATE_KEYS = ("milestones", "gamma", "current_epoch")


class MultiStepLR(LRScheduler):
    """lr = initial_lr * gamma ** (number of milestones <= current_epoch)."""

    def __init__(self, optimizer: Optimizer, milestones: Iter[int], gamma: float = 0.1,
                 current_epoch: int = -1):
        if not list(milestones) == sorted(milestones):
            raise ValueError("Milestones should be a list of increasing integers. Got "
                             "{}".format(milestones))
        self.milestones = milestones
        self.gamma = gamma
        super().__init__(optimizer, current_epoch)

    def state_dict(self) -> dict:
        return {key: value for key, value in self.__dict__.items() if key in _STATE_KEYS}

    def load_state_dict(self, state_dict: dict) -> None:
        loaded = {}
        for key in _STATE_KEYS:
            if key not in state_dict.keys():
                raise KeyError("key '{}'' is not specified in state_dict when loading state "
                               "dict".format(key))
            loaded[key] = state_dict[key]
        self.__dict__.update(loaded)

    def get_lr(self) -> list:
        return [base_lr * self.gamma ** bisect_right(self.milestones, self.current_epoch)
                for base_lr in self.base_lrs]
