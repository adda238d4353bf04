"""`LRScheduler`: base of learning-rate schedules; each `step()` (one epoch) writes the
new rate into every parameter group of the optimizer it wraps."""
from __future__ import annotations

from abc import ABCMeta

from .optimizer import Optimizer


class LRScheduler(metaclass=ABCMeta):
    """Wraps `optimizer`; current_epoch -1 starts fresh (each group records its
    "initial_lr"), another value resumes (the groups must already have "initial_lr")."""

    def __init__(self, optimizer: Optimizer, current_epoch: int = -1):
        if not isinstance(optimizer, Optimizer):
            raise TypeError("optimizer argument given to the lr_scheduler should be Optimizer")
        self.optimizer = optimizer
        self.current_epoch = current_epoch
        if current_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError("param 'initial_lr' is not specified in param_groups[{}] "
                                   "when resuming an optimizer".format(i))
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.step()

    def state_dict(self):
        """The scheduler's state (its attributes other than the optimizer)."""
        raise NotImplementedError

    def load_state_dict(self, state_dict):
        """Restore what `state_dict` returned."""
        raise NotImplementedError

    def get_lr(self):
        """The learning rate of each group for the current epoch."""
        raise NotImplementedError

    def step(self, epoch=None) -> None:
        """Advance to the next epoch (or to `epoch`) and set the groups' "lr"."""
        if epoch is None:
            self.current_epoch += 1
        else:
            self.current_epoch = epoch
        for group, lr in zip(self.optimizer.param_groups, self.get_lr()):
            group["lr"] = lr
