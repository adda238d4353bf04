"""`megtrace.optimizer`: MegEngine's optimizers (in-place, eager updates of Parameters
from their `.grad`), learning-rate schedulers and gradient clipping."""
from . import adadelta, adagrad, adam, adamw, clip_grad, lamb, lr_scheduler, multi_step_lr
from . import optimizer, sgd
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam
from .adamw import AdamW
from .clip_grad import clip_grad_norm, clip_grad_value
from .lamb import LAMB, LAMBFp16
from .lr_scheduler import LRScheduler
from .multi_step_lr import MultiStepLR
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Adadelta", "Adagrad", "Adam", "AdamW", "LAMB", "LAMBFp16", "LRScheduler",
           "MultiStepLR", "Optimizer", "SGD", "clip_grad_norm", "clip_grad_value"]
