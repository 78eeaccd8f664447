"""Tasks end to end, one module each: data, loss, metrics, prediction and a training recipe.

``dates`` is Part II's date translation (chapters 03-05), ``copy`` chapter 03's digit copying
(length the only variable); ``imdb`` is Part IV's review classification. Tasks sit above the
models and the training loop; nothing below imports them.
"""
