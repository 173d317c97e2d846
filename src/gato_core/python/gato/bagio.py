"""``gato.bagio``, a path the reference API and older code import: the readers are
:mod:`gato.replay.bagio` (whole bag) and :mod:`gato.replay.bagstream` (message by message)
(docs/architecture.md); this file only re-exports them."""
from .replay.bagio import BagContents, MCAP_MAGIC, read_bag, SQLITE_MAGIC, ZSTD_MAGIC  # noqa: F401
from .replay.bagstream import BagStream, stream_bag  # noqa: F401
