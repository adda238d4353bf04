"""`Function`: a block of operations with a user-written gradient (MegEngine's
autodiff.Function)."""
from __future__ import annotations

from ..tensor import Tensor
from .grad import tracking_tapes


class Function:
    """Subclass and define `forward(*tensors)` (returns a Tensor or a tuple of them) and
    `backward(*output_grads)` (returns one gradient per forward input, a Tensor when there
    is one input; None stops the gradient of that input). An output that received no
    gradient passes None to backward. An instance is meant to be called once."""

    def forward(self, *args, **kwargs):
        raise NotImplementedError

    def backward(self, *output_grads):
        raise NotImplementedError

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tensors

    def __call__(self, *args):
        for arg in args:
            if not isinstance(arg, Tensor):
                raise TypeError(
                    "op Function expect type Tensor as inputs, got {}".format(type(arg)))
        tapes = tracking_tapes(args)
        if not tapes:
            return self.forward(*args)
        inputs = [Tensor(arg) for arg in args]       # as they are before forward runs
        for tape in tapes:
            tape.suppress()
        try:
            result = self.forward(*args)
        finally:
            for tape in reversed(tapes):
                tape.resume()
        single = isinstance(result, Tensor)
        results = (result,) if single else tuple(result)
        outputs = tuple(Tensor._wrap(r._value, r._var, r._owner, r._device) for r in results)
        name = type(self).__name__

        def backward(grads, wanted):
            got = self.backward(*grads)
            return (got,) if got is None or isinstance(got, Tensor) else tuple(got)

        for tape in tapes:
            tape.add_node(name, backward, inputs, outputs)
        return outputs[0] if single else outputs

    def __getstate__(self):
        return self.__dict__

    def __setstate__(self, state):
        self.__dict__.update(state)
