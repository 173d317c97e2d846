"""``gato.bagstream``, a path the reference API and older code import: the module is
:mod:`gato.replay.bagstream` (docs/architecture.md); this file only re-exports it."""
from .replay.bagstream import (__all__, BagStream, stream_bag, ZSTD_MAGIC)  # noqa: F401
