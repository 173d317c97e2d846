"""``gato.bagio``, a path the reference API and older code import: the readers are
:mod:`gato.replay.bagio` (whole bag) and :mod:`gato.replay.bagstream` (message by message)
(docs/architecture.md); this file only re-exports them."""
from .replay.bagfiles import MCAP_MAGIC, SQLITE_MAGIC, ZSTD_MAGIC  # noqa: F401
from .replay.bagio import BagContents, read_bag  # noqa: F401
from .replay.bagstream import BagStream, stream_bag  # noqa: F401
