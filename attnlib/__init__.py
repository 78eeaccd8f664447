"""attnlib: the small library behind *Attention, step by step*.

Modules follow the order in which the chapters meet them: ``reference`` (NumPy oracle),
``scores``, ``masks``, ``attention``, the models (``seq2seq``, ``transformer``), ``training``,
``data`` and the ``tasks`` built on them, then ``plots`` and ``widgets`` on top. Masks are
boolean everywhere and ``True`` means "may attend".
"""

from attnlib.attention import MultiHeadAttention, attend
from attnlib.config import choose_device, quick_mode, seed_everything, setup_notebook
from attnlib.masks import causal_mask, combine_masks, masked_softmax, padding_mask

__all__ = [
    "MultiHeadAttention",
    "attend",
    "causal_mask",
    "choose_device",
    "combine_masks",
    "masked_softmax",
    "padding_mask",
    "quick_mode",
    "seed_everything",
    "setup_notebook",
]

__version__ = "0.1.0"
